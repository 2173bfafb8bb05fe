"""`python -m trainers env-server frozenlake --port N`: serve an environment over OpenEnv's HTTP protocol."""

from __future__ import annotations

import argparse
import json
import signal
import sys
from typing import Any

from trainers.envs.base import ENVIRONMENTS
from trainers.envs.server import (
    IDLE_S,
    MAX_BODY_BYTES,
    MAX_EPISODES,
    EnvironmentServer,
    HTTPEnvironmentServer,
)


def add_parser(subparsers: argparse._SubParsersAction) -> None:
    parser = subparsers.add_parser(
        "env-server", help="serve an environment over OpenEnv's HTTP protocol (reset, step, state)"
    )
    parser.add_argument("env", choices=sorted(ENVIRONMENTS.names()), help="the registered environment")
    parser.add_argument("--host", default="127.0.0.1", help="address to listen on (default loopback)")
    parser.add_argument("--port", type=int, default=8000, help="0 picks a free port (printed at start)")
    parser.add_argument("--describe", action="store_true", help="a line in words under every grid")
    parser.add_argument("--max-steps", type=int, help="actions per episode (the environment's default)")
    parser.add_argument("--config", type=json.loads, default={},
                        help='other environment config as JSON, e.g. {"size": 6}')  # fmt: skip
    parser.add_argument("--max-episodes", type=int, default=MAX_EPISODES, help="live episodes at most")
    parser.add_argument("--idle-s", type=float, default=IDLE_S,
                        help="an episode idle this long makes room for a new one at the bound")  # fmt: skip
    parser.add_argument("--max-body-bytes", type=int, default=MAX_BODY_BYTES, help="a request's body at most")
    parser.set_defaults(func=run)


def env_config(args: argparse.Namespace) -> dict[str, Any]:
    """The environment's keyword config: `--config`, then the flags that were given."""
    if not isinstance(args.config, dict):
        raise ValueError("--config must be a JSON object")
    config = dict(args.config)
    if args.describe:
        config["describe"] = True
    if args.max_steps is not None:
        config["max_steps"] = args.max_steps
    return config


def run(args: argparse.Namespace) -> int:
    """Serve until SIGTERM or Ctrl-C; the first line on stdout names the URL (with the port picked)."""
    try:
        app = EnvironmentServer(args.env, env_config(args), max_episodes=args.max_episodes,
                                idle_s=args.idle_s, max_body_bytes=args.max_body_bytes)  # fmt: skip
    except (TypeError, ValueError) as exc:
        print(f"env-server: error: {exc}", file=sys.stderr)
        return 2
    server = HTTPEnvironmentServer((args.host, args.port), app)
    host, port = server.server_address[:2]
    print(f"env-server {args.env} listening on http://{host}:{port}", flush=True)
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(0))
    try:
        server.serve_forever()
    except KeyboardInterrupt:
        pass
    finally:
        server.server_close()
    return 0
