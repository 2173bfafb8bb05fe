"""A tool of an operator-listed MCP server, called with `tools/call` like a built-in tool.

The binding names the server (never its URL or command: those are the operator's, see
trainers/mcp/servers.py), the server's tool name, and the input schema pinned at import, against which
calls are validated before any round trip. The result's text blocks, then its structured content as
JSON, become the observation, cut at `max_chars` with a notice. A server that is down, slow, breaks the
protocol or answers `isError` gives an error observation marked as the server's (`server_error`), which
the step metrics count per server; the trajectory and the run go on.
"""

from __future__ import annotations

import json
from typing import Any

from trainers.mcp.client import POOL, McpCallError
from trainers.mcp.servers import McpServerError, server_for
from trainers.tools.base import TOOLS, Tool, ToolOutput
from trainers.trajectory import ToolResult

MAX_CHARS = 8192


@TOOLS.register("mcp")
class McpTool(Tool):
    """Name, description and argument schema come from the binding, so one class serves every tool."""

    name = "mcp"
    description = "A tool of an MCP server the operator registered."
    parameters: dict[str, Any] = {"type": "object"}
    default_timeout_s = 30.0

    def __init__(
        self,
        *,
        server: str,
        tool: str,
        parameters: dict[str, Any],
        name: str | None = None,
        description: str = "",
        schema_hash: str | None = None,
        team: str | None = None,
        timeout_s: float | None = None,
        max_chars: int = MAX_CHARS,
    ) -> None:
        super().__init__(timeout_s=timeout_s)
        if max_chars < 1:
            raise ValueError("max_chars must be at least 1")
        self.server_name, self.tool = server, tool
        self.name = name or tool
        self.description = description or self.description
        self.parameters = parameters
        self.schema_hash = schema_hash  # the import's pin, checked at launch against the live server
        self.team = team
        self.max_chars = max_chars

    async def run(self, arguments: dict[str, Any]) -> ToolOutput:
        try:
            server = server_for(self.server_name, self.team)
            result = await POOL.call_tool(server, self.tool, arguments, self.timeout_s)
        except (McpServerError, McpCallError) as exc:
            return ToolOutput(False, "", f"{self.name}: {exc}")
        text = self._clip(result_text(result))
        if result.is_error:
            return ToolOutput(False, "", f"{self.name} failed: {text}")
        return ToolOutput(True, text)

    async def invoke(self, arguments: Any) -> ToolResult:
        result = await super().invoke(arguments)
        result.server = self.server_name
        result.server_error = not result.ok and self.validation_error(arguments) is None
        return result

    def _clip(self, text: str) -> str:
        if len(text) <= self.max_chars:
            return text
        return f"{text[: self.max_chars]}\n[truncated: {len(text) - self.max_chars} more characters]"


def result_text(result: Any) -> str:
    """Text blocks joined by newlines, then the structured content as JSON when the text lacks it;
    other blocks (images, audio, resources) are named, not inlined."""
    parts = []
    for block in result.content:
        if getattr(block, "type", None) == "text":
            parts.append(block.text)
        else:
            parts.append(f"[{getattr(block, 'type', 'content')} content]")
    if result.structured_content is not None:
        structured = json.dumps(result.structured_content, ensure_ascii=False, separators=(",", ":"))
        if structured not in parts:
            parts.append(structured)
    return "\n".join(parts)
