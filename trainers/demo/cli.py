"""`python -m trainers demo --seed S --out DIR`: SFT then GRPO with a calculator; prints before/after.

`--env frozenlake|sokoban --estimator grpo|gigpo` runs the multi-turn recipe instead (`--task` is the
older spelling of `--env`; `--size 6` plays 6x6 lakes; `--env-server URL` plays RL and evaluation through an
environment server, `python -m trainers env-server`). A progress bar per phase (SFT, RL, evaluation)
goes to stderr when it is a terminal; `--no-progress` turns them off.
"""

from __future__ import annotations

import argparse
import dataclasses

from trainers.demo.progress import Progress, quiet_libraries
from trainers.demo.settings import DemoSettings, SettingsError

ENVS = ["calculator", "frozenlake", "sokoban"]


def add_parser(subparsers: argparse._SubParsersAction) -> None:
    parser = subparsers.add_parser("demo", help="the CPU demos: a tiny model learns a calculator or a game")
    parser.add_argument("--seed", type=int, default=0, help="model, SFT and RL seed")
    parser.add_argument("--out", default="runs/demo", help="output directory")
    parser.add_argument("--env", "--task", dest="env", choices=ENVS, default="calculator",
                        help="frozenlake or sokoban: the multi-turn recipe")  # fmt: skip
    parser.add_argument("--estimator", choices=["grpo", "gigpo"], help="multi-turn only (default gigpo)")
    parser.add_argument("--size", type=int, help="FrozenLake's side, 3 to 6 (default 4; recipes for 4 and 6)")
    parser.add_argument("--env-server", metavar="URL",
                        help="multi-turn only: RL and evaluation play through this environment server "
                             "(python -m trainers env-server ENV ...)")  # fmt: skip
    parser.add_argument("--no-progress", dest="progress", action="store_false",
                        help="no progress bars (they show only when stderr is a terminal)")  # fmt: skip
    defaults = DemoSettings()
    for f in dataclasses.fields(DemoSettings):
        if f.name in ("seed",):
            continue
        kind = int if f.type in ("int", "int | None") else float
        parser.add_argument(f"--{f.name.replace('_', '-')}", type=kind, default=None,
                            help=f"calculator default {getattr(defaults, f.name)}")  # fmt: skip
    parser.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    if args.env != "calculator":
        return run_multiturn(args)
    from trainers.demo.recipe import run_demo

    refuse_flags(args, ["estimator", "size", "env_server"],
                 "only to frozenlake and sokoban, not to the calculator demo")  # fmt: skip
    names = {f.name for f in dataclasses.fields(DemoSettings)}
    settings = DemoSettings(**{k: v for k, v in vars(args).items() if k in names and v is not None})
    report = run_demo(settings, args.out, progress(args))
    print(report.table())
    return 0


def run_multiturn(args: argparse.Namespace) -> int:
    """The multi-turn recipe; the calculator's knobs that it shares (rl_steps, threads, ...) apply."""
    from trainers.demo.games import multiturn_recipe
    from trainers.demo.multiturn import MultiTurnSettings, run_multiturn_demo, served

    names = {f.name for f in dataclasses.fields(MultiTurnSettings)}
    calculator_only = sorted({f.name for f in dataclasses.fields(DemoSettings)} - names)
    refuse_flags(args, calculator_only, "only to the calculator demo")
    if args.env != "frozenlake":
        refuse_flags(args, ["size"], "only to frozenlake (Sokoban rooms are 5x5)")
    given = {k: v for k, v in vars(args).items() if k in names and v is not None and k != "env"}
    game, settings = multiturn_recipe(args.env, args.size or 4, **given)
    if args.env_server:
        game = served(game, args.env_server)
    report = run_multiturn_demo(game, settings, args.out, progress(args))
    print(report.table())
    return 0


def progress(args: argparse.Namespace) -> Progress:
    """Our bars (unless --no-progress; only on a terminal), and none of the libraries' own."""
    quiet_libraries()
    return Progress(enabled=None if args.progress else False)


def refuse_flags(args: argparse.Namespace, names: list[str], where: str) -> None:
    """SettingsError naming each of `names` that was given: a flag is never silently ignored."""
    given = [f"--{name.replace('_', '-')}" for name in names if getattr(args, name, None) is not None]
    if given:
        raise SettingsError(f"{', '.join(given)} {'applies' if len(given) == 1 else 'apply'} {where}")
