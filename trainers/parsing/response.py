"""What a template's parser returns for one piece of assistant text."""

from __future__ import annotations

from dataclasses import dataclass, field

from trainers.trajectory import ToolCall


@dataclass
class ParsedResponse:
    """Reasoning, every tool call (malformed ones carry `parse_error`), the final answer, tags in order."""

    reasoning: str | None = None
    tool_calls: list[ToolCall] = field(default_factory=list)
    final_answer: str | None = None
    tags: list[str] = field(default_factory=list)
