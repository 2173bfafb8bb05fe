"""The tools of one trajectory: built from bindings, called concurrently, closed at the end."""

from __future__ import annotations

import asyncio
from typing import Any

from pydantic import BaseModel, ConfigDict, Field

from trainers.parsing.tool_calls import called_name
from trainers.tools.base import TOOLS, Tool
from trainers.tools.environment import EnvironmentTool
from trainers.trajectory import ToolCall, ToolResult


class ToolBinding(BaseModel):
    """A tool by registry name, with the keyword config its class takes (timeout_s, url, corpus_path...)."""

    model_config = ConfigDict(extra="forbid")

    name: str
    config: dict[str, Any] = Field(default_factory=dict)


def _binding(item: ToolBinding | dict[str, Any] | str | BaseModel) -> ToolBinding:
    if isinstance(item, ToolBinding):
        return item
    if isinstance(item, BaseModel):  # e.g. a run config's own binding section
        item = item.model_dump()
    return ToolBinding(name=item) if isinstance(item, str) else ToolBinding(**item)


class Toolset:
    """One fresh instance of each tool per trajectory, so stateful tools never share state."""

    def __init__(self, tools: list[Tool]) -> None:
        self.tools: dict[str, Tool] = {}
        for tool in tools:
            if tool.name in self.tools:
                raise ValueError(f"two tools are named {tool.name!r}; give one a different name")
            self.tools[tool.name] = tool

    @classmethod
    def build(
        cls,
        bindings: list[ToolBinding | dict[str, Any] | str],
        *,
        initial_state: dict[str, Any] | None = None,
        seed: int | None = None,
    ) -> Toolset:
        """Instantiate every binding; environments are reset to `initial_state` (a dataset row's level)."""
        tools = []
        for binding in map(_binding, bindings):
            tool_cls = TOOLS.get(binding.name)  # unknown names raise RegistryError listing the known ones
            try:
                tool = tool_cls(**binding.config)
            except TypeError as exc:
                raise ValueError(f"bad config for tool {binding.name!r}: {exc}") from None
            if isinstance(tool, EnvironmentTool):
                tool.reset(initial_state, seed)
            tools.append(tool)
        return cls(tools)

    async def start(self) -> None:
        """Start every tool (an environment server's tool resets its episode here); call once after build."""
        await asyncio.gather(*(tool.start() for tool in self.tools.values()))

    def specs(self) -> list[dict[str, Any]]:
        """OpenAI function specs, in binding order, for the template's system prompt."""
        return [tool.spec() for tool in self.tools.values()]

    @property
    def environment(self) -> Any:
        """The environment of the first environment tool (RAGEN: one per trajectory), or None."""
        for tool in self.tools.values():
            if isinstance(tool, EnvironmentTool):
                return tool.environment
        return None

    def runnable(self, call: ToolCall) -> bool:
        """Whether the call would run: well formed and naming a tool here (others get an error result)."""
        return call.parse_error is None and call.name in self.tools

    async def call_many(self, calls: list[ToolCall]) -> list[ToolResult]:
        """Run a turn's calls concurrently; results keep the call order; never raises.

        Calls to one environment run one after another in call order, since each action changes the
        state; its per-turn action cap counts over all of them (call it once per turn).
        """
        results: list[ToolResult | None] = [None] * len(calls)
        chains: dict[str, list[int]] = {}
        jobs = []
        for i, call in enumerate(calls):
            tool = self.tools.get(call.name)
            if call.parse_error is not None or tool is None:
                results[i] = self._rejected(call)
            elif isinstance(tool, EnvironmentTool):
                chains.setdefault(call.name, []).append(i)
            else:
                jobs.append(self._one(tool, call, i, results))
        for name, indices in chains.items():
            jobs.append(self._chain(self.tools[name], [calls[i] for i in indices], indices, results))
        await asyncio.gather(*jobs)
        return [r for r in results if r is not None]

    @staticmethod
    async def _one(tool: Tool, call: ToolCall, index: int, results: list[ToolResult | None]) -> None:
        results[index] = await tool.invoke(call.arguments)

    @staticmethod
    async def _chain(tool: EnvironmentTool, calls: list[ToolCall], indices: list[int], results: list) -> None:
        tool.begin_turn()
        for call, index in zip(calls, indices, strict=True):
            results[index] = await tool.invoke(call.arguments)

    def _rejected(self, call: ToolCall) -> ToolResult:
        if call.parse_error is not None:
            message = f"malformed tool call: {call.parse_error}"
        else:
            known = ", ".join(self.tools) or "none"
            message = f"unknown tool {call.name!r}; available tools: {known}"
        return ToolResult(called_name(call), False, message, message, 0.0, executed=False)

    async def close(self) -> None:
        await asyncio.gather(*(tool.close() for tool in self.tools.values()))
