"""`python -m trainers tools list-mcp TARGET`: a server's tools as JSON; `mcp-serve`: built-ins over MCP."""

from __future__ import annotations

import argparse
import asyncio
import json
import shlex
import sys

from trainers.mcp.client import POOL, McpCallError
from trainers.mcp.servers import McpServer, schema_hash
from trainers.tools.mcp_serve import SERVABLE, build_server, serve_http, serve_stdio


def add_parser(subparsers: argparse._SubParsersAction) -> None:
    tools = subparsers.add_parser("tools", help="inspect tool servers")
    tools_commands = tools.add_subparsers(dest="tools_command", required=True)
    list_mcp = tools_commands.add_parser(
        "list-mcp", help="print an MCP server's tools (name, description, input schema, its hash) as JSON"
    )
    list_mcp.add_argument("target", help="a streamable-HTTP URL (http://host:port/mcp) or a stdio command")
    list_mcp.add_argument("--timeout", type=float, default=10.0, help="seconds to wait for the server")
    list_mcp.set_defaults(func=_list_mcp)

    serve = subparsers.add_parser("mcp-serve", help="serve built-in tools as an MCP server")
    serve.add_argument("tools", nargs="+", choices=SERVABLE, help="built-in tools to serve")
    serve.add_argument("--stdio", action="store_true", help="speak MCP on stdin/stdout instead of HTTP")
    serve.add_argument("--host", default="127.0.0.1")
    serve.add_argument("--port", type=int, default=8765, help="streamable-HTTP port (path /mcp)")
    serve.set_defaults(func=_serve)


def target_server(target: str, timeout_s: float = 10.0) -> McpServer:
    """The server a command line names: a URL is streamable HTTP, anything else a stdio command."""
    if target.startswith(("http://", "https://")):
        return McpServer(name="target", url=target, connect_timeout_s=timeout_s)
    return McpServer(name="target", command=tuple(shlex.split(target)), connect_timeout_s=timeout_s)


async def _listing(server: McpServer) -> list[dict]:
    try:
        tools = await POOL.list_tools(server)
    finally:
        await POOL.close()
    return [
        {
            "name": tool.name,
            "description": tool.description or "",
            "input_schema": tool.input_schema,
            "schema_hash": schema_hash(tool.input_schema),
        }
        for tool in tools
    ]


def _list_mcp(args: argparse.Namespace) -> int:
    try:
        listing = asyncio.run(_listing(target_server(args.target, args.timeout)))
    except (McpCallError, ValueError) as exc:
        print(f"python -m trainers tools list-mcp: error: {exc}", file=sys.stderr)
        return 1
    print(json.dumps(listing, indent=2, ensure_ascii=False))
    return 0


def _serve(args: argparse.Namespace) -> int:
    server = build_server(list(dict.fromkeys(args.tools)))
    if args.stdio:
        serve_stdio(server)
    else:
        serve_http(server, args.host, args.port)
    return 0
