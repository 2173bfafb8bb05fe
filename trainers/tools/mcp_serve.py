"""Built-in tools served as an MCP server: an example server, and the proof that a rollout through MCP
calls the same tool as the built-in binding (same name, schema and observations).

    python -m trainers mcp-serve calculator --port 8765      # streamable HTTP on 127.0.0.1:8765/mcp
    python -m trainers mcp-serve calculator --stdio          # stdio, for an operator's command entry

Each call builds a fresh instance of the tool (as a trajectory would) and answers its observation as
text, or its error with `isError`.
"""

from __future__ import annotations

from typing import Any

from trainers.tools.base import TOOLS

SERVABLE = ("calculator", "search")  # stateless built-ins; python needs the sandbox's own setup


def build_server(tool_names: list[str], tool_config: dict[str, dict[str, Any]] | None = None) -> Any:
    """A low-level MCP server whose tools/list is the built-ins' specs and tools/call runs them."""
    import mcp_types as types
    from mcp.server.lowlevel import Server

    config = tool_config or {}
    specs = {name: TOOLS.get(name).spec()["function"] for name in tool_names}

    async def list_tools(ctx: Any, params: Any) -> types.ListToolsResult:
        tools = [
            types.Tool(name=name, description=spec["description"], input_schema=spec["parameters"])
            for name, spec in specs.items()
        ]
        return types.ListToolsResult(tools=tools)

    async def call_tool(ctx: Any, params: Any) -> types.CallToolResult:
        if params.name not in specs:
            return _text_result(f"unknown tool {params.name!r}", error=True)
        tool = TOOLS.get(params.name)(**config.get(params.name, {}))
        try:
            result = await tool.invoke(params.arguments or {})
        finally:
            await tool.close()
        return _text_result(result.output, error=not result.ok)

    return Server("agent-rl-workbench", on_list_tools=list_tools, on_call_tool=call_tool)


def _text_result(text: str, *, error: bool) -> Any:
    import mcp_types as types

    return types.CallToolResult(content=[types.TextContent(text=text)], is_error=error)


def serve_http(server: Any, host: str, port: int) -> None:
    import uvicorn

    uvicorn.run(server.streamable_http_app(host=host), host=host, port=port, log_level="warning")


def serve_stdio(server: Any) -> None:
    import anyio
    from mcp.server.stdio import stdio_server

    async def run() -> None:
        async with stdio_server() as (read, write):
            await server.run(read, write, server.create_initialization_options())

    anyio.run(run)
