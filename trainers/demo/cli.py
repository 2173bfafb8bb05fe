"""`python -m trainers demo --seed S --out DIR`: SFT then GRPO with a calculator; prints before/after."""

from __future__ import annotations

import argparse
import dataclasses

from trainers.demo.settings import DemoSettings


def add_parser(subparsers: argparse._SubParsersAction) -> None:
    parser = subparsers.add_parser("demo", help="the CPU demo: a tiny model learns to use a calculator")
    parser.add_argument("--seed", type=int, default=0, help="model, SFT and RL seed")
    parser.add_argument("--out", default="runs/demo", help="output directory")
    tasks = ["calculator", "frozenlake"]
    parser.add_argument("--task", choices=tasks, default="calculator", help="frozenlake: multi-turn RL")
    parser.add_argument("--estimator", default="gigpo", help="frozenlake only: grpo or gigpo")
    defaults = DemoSettings()
    for f in dataclasses.fields(DemoSettings):
        if f.name in ("seed",):
            continue
        kind = int if f.type in ("int", "int | None") else float
        parser.add_argument(f"--{f.name.replace('_', '-')}", type=kind, default=getattr(defaults, f.name))
    parser.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    import json

    from trainers.demo.frozenlake import run_lake_demo
    from trainers.demo.recipe import run_demo

    if args.task == "frozenlake":
        if args.threads:
            import torch

            torch.set_num_threads(args.threads)
        print(
            json.dumps(
                run_lake_demo(args.out, estimator=args.estimator, seed=args.seed, rl_steps=args.rl_steps)
            )
        )
        return 0
    names = {f.name for f in dataclasses.fields(DemoSettings)}
    settings = DemoSettings(**{k: v for k, v in vars(args).items() if k in names})
    report = run_demo(settings, args.out)
    print(report.table())
    return 0
