"""The trainers command line: one subcommand per task, each in the module that owns it."""

from __future__ import annotations

import argparse
import sys

from trainers.agent import cli as agent_cli
from trainers.config.loader import ConfigError
from trainers.data_prep import cli as data_prep_cli
from trainers.demo import cli as demo_cli
from trainers.demo.settings import SettingsError
from trainers.envs import cli as envs_cli
from trainers.rollout import cli as rollout_cli
from trainers.sandbox import cli as sandbox_cli
from trainers.tools import cli as tools_cli
from trainers.training import cli as training_cli
from trainers.training import eval_cli, export_cli
from trainers.training.export import ExportError

# Mistakes in what was given (a setting, a config, a path): told in one line, not a traceback
USER_ERRORS = (SettingsError, ConfigError, FileNotFoundError, ExportError)


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="python -m trainers", description="Agent RL Workbench trainers")
    subparsers = parser.add_subparsers(dest="command", required=True)
    sandbox_cli.add_parser(subparsers)
    rollout_cli.add_parser(subparsers)
    training_cli.add_parser(subparsers)
    demo_cli.add_parser(subparsers)
    data_prep_cli.add_parser(subparsers)
    eval_cli.add_parser(subparsers)
    tools_cli.add_parser(subparsers)
    envs_cli.add_parser(subparsers)
    agent_cli.add_parser(subparsers)
    export_cli.add_parser(subparsers)
    return parser


def main(argv: list[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    try:
        return args.func(args)
    except USER_ERRORS as exc:
        print(f"{parser.prog} {args.command}: error: {exc}", file=sys.stderr)
        return 2
