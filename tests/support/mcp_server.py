"""A real MCP server (the official SDK's MCPServer) for tests, with well-behaved and hostile tools.

    python -m tests.support.mcp_server http --port 8765 [--variant 2]
    python -m tests.support.mcp_server stdio

Tools: `add`, `echo`, `env` (what the process's environment holds of a name), `slow` (sleeps),
`big` (a reply of n characters), `fails` (raises: an isError result), `crash` (the process exits
mid-call), and over stdio `garbage` (writes a line that is not JSON-RPC, then answers late). Over HTTP
a middleware answers a call of `garbage` with a body that is not JSON-RPC. `--variant 2` changes the
input schema of `add` (a third argument), as a server upgraded between import and launch would.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import sys
from typing import Any

from mcp.server.mcpserver import MCPServer
from mcp.server.mcpserver.exceptions import ToolError


def build_server(variant: int) -> MCPServer:
    server = MCPServer("workbench-test", log_level="WARNING")

    if variant == 2:

        @server.tool(description="Add three integers.")
        def add(a: int, b: int, c: int = 0) -> int:
            return a + b + c
    else:

        @server.tool(description="Add two integers.")
        def add(a: int, b: int) -> int:
            return a + b

    @server.tool(description="Repeat the text.")
    def echo(text: str) -> str:
        return text

    @server.tool(description="The value of an environment variable in the server process, or <unset>.")
    def env(name: str) -> str:
        return os.environ.get(name, "<unset>")

    @server.tool(description="Sleep, then say so.")
    async def slow(seconds: float) -> str:
        await asyncio.sleep(seconds)
        return f"slept {seconds}"

    @server.tool(description="A reply of n characters.")
    def big(n: int) -> str:
        return "x" * n

    @server.tool(description="Always fails.")
    def fails() -> str:
        raise ToolError("the tool failed on purpose")

    @server.tool(description="Ends the server process mid-call.")
    def crash() -> str:
        os._exit(3)

    @server.tool(description="Breaks the protocol.")
    async def garbage() -> str:
        sys.stdout.write("this line is not JSON-RPC\n")
        sys.stdout.flush()
        await asyncio.sleep(60)
        return "late"

    return server


class GarbageOnCall:
    """ASGI middleware: a `tools/call` of `garbage` gets a 200 whose JSON body is not a JSON-RPC message."""

    def __init__(self, app: Any) -> None:
        self.app = app

    async def __call__(self, scope: dict, receive: Any, send: Any) -> None:
        if scope["type"] != "http" or scope["method"] != "POST":
            return await self.app(scope, receive, send)
        body, more = b"", True
        while more:
            message = await receive()
            body += message.get("body", b"")
            more = message.get("more_body", False)
        if b'"garbage"' in body and b"tools/call" in body:
            payload = json.dumps({"not": "json-rpc"}).encode()
            length = str(len(payload)).encode()
            headers = [(b"content-type", b"application/json"), (b"content-length", length)]
            await send({"type": "http.response.start", "status": 200, "headers": headers})
            return await send({"type": "http.response.body", "body": payload})

        replayed = False

        async def replay() -> dict:  # the body once, then the client's own events (its disconnect)
            nonlocal replayed
            if replayed:
                return await receive()
            replayed = True
            return {"type": "http.request", "body": body, "more_body": False}

        return await self.app(scope, replay, send)


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("transport", choices=["http", "stdio"])
    parser.add_argument("--port", type=int, default=0)
    parser.add_argument("--variant", type=int, default=1)
    args = parser.parse_args()
    server = build_server(args.variant)
    if args.transport == "stdio":
        server.run("stdio")
        return
    import uvicorn

    app = GarbageOnCall(server.streamable_http_app())
    uvicorn.run(app, host="127.0.0.1", port=args.port, log_level="warning", lifespan="on")


if __name__ == "__main__":
    main()
