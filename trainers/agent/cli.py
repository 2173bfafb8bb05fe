"""`python -m trainers serve MODEL_DIR --port N`: a local model on an OpenAI-compatible endpoint."""

from __future__ import annotations

import argparse
import os
import socket
import sys

DEFAULT_MAX_NEW_TOKENS = 512


def add_parser(subparsers: argparse._SubParsersAction) -> None:
    parser = subparsers.add_parser(
        "serve", help="serve a local model directory on an OpenAI-compatible endpoint (/v1/chat/completions)"
    )
    parser.add_argument("model", help="a from_pretrained directory (model and tokenizer)")
    parser.add_argument("--host", default="127.0.0.1", help="address to listen on (default loopback)")
    parser.add_argument("--port", type=int, default=8000, help="0 picks a free port (printed at start)")
    parser.add_argument("--template", default="qwen_tool", choices=("qwen_tool", "hf_native"),
                        help="the template that renders conversations and parses calls")  # fmt: skip
    parser.add_argument(
        "--max-new-tokens", type=int, default=DEFAULT_MAX_NEW_TOKENS, help="per completion at most"
    )
    parser.add_argument(
        "--api-key-env", help="name of an environment variable holding the key clients must send"
    )
    parser.add_argument("--model-name", default="local", help="the model id /v1/models lists")
    parser.add_argument("--threads", type=int, help="torch CPU threads")
    parser.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    """Serve until SIGTERM or Ctrl-C; the first line on stdout names the base URL (with the port picked)."""
    import torch
    import uvicorn

    from trainers.agent.served import ServedEndpoint
    from trainers.backends.hf import HFBackend
    from trainers.models.model_io import load_policy
    from trainers.templates import TEMPLATES

    api_key = os.environ.get(args.api_key_env) if args.api_key_env else None
    if args.api_key_env and not api_key:
        print(f"serve: error: the environment variable {args.api_key_env} is not set", file=sys.stderr)
        return 2
    if args.threads:
        torch.set_num_threads(args.threads)
    model, tokenizer = load_policy(args.model)
    model.eval()
    template = TEMPLATES.get(args.template)(tokenizer=tokenizer)
    endpoint = ServedEndpoint(HFBackend(model, tokenizer), template, max_new_tokens=args.max_new_tokens,
                              api_key=api_key, model_name=args.model_name)  # fmt: skip
    listener = socket.create_server((args.host, args.port))
    host, port = listener.getsockname()[:2]
    print(f"serving {args.model} on http://{host}:{port}/v1", flush=True)
    config = uvicorn.Config(endpoint.app(), log_level="warning", access_log=False, lifespan="off")
    uvicorn.Server(config).run(sockets=[listener])
    return 0
