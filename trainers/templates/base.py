"""The chat-template interface: prompt rendering, response parsing, format checks and tool-response glue."""

from __future__ import annotations

import json
from abc import ABC, abstractmethod
from typing import Any, ClassVar

from trainers.parsing.response import ParsedResponse
from trainers.parsing.tags import scan_tags, tags_match
from trainers.registry import Registry
from trainers.templates.jinja import render_template_source
from trainers.trajectory import ToolResult


class ChatTemplate(ABC):
    """One template family. Subclasses set the class attributes and implement parse and the glue.

    `turn_end` is the text that closes an assistant turn; when the policy already sampled it
    (the turn ended with end-of-sequence), the glue leaves it out (`turn_closed=True`).
    """

    name: ClassVar[str]
    stop_strings: ClassVar[list[str]] = []
    prompt_source: ClassVar[str]
    turn_end: ClassVar[str] = ""
    tag_names: ClassVar[list[str]] = []
    answer_tag: ClassVar[str | None] = "answer"  # boxed answers count as this tag in `tags`
    format_pattern: ClassVar[str] = ".*"  # regex over the tag sequence, see parsing.tags.tags_match

    def __init__(self, *, tokenizer: Any = None) -> None:
        self.tokenizer = tokenizer

    # --- prompt ----------------------------------------------------------------------------------
    def prompt_context(self, *, question: str, tools: list[dict], observation: str | None) -> dict[str, Any]:
        """Variables a prompt source may use."""
        return {
            "question": question,
            "tools": tools,
            "tools_json": "\n".join(json.dumps(t, ensure_ascii=False) for t in tools),
            "tool_names": [tool_name(t) for t in tools],
            "observation": observation,
        }

    def render_prompt(
        self,
        *,
        question: str,
        tools: list[dict],
        observation: str | None = None,
        source: str | None = None,
        tokenizer: Any = None,
    ) -> str:
        """The prompt text; `source` replaces the template's own Jinja source (user-edited templates)."""
        context = self.prompt_context(question=question, tools=tools, observation=observation)
        return render_template_source(source if source is not None else self.prompt_source, context)

    def stops(self, tools: list[dict]) -> list[str]:
        """Stop strings for generation with these tools (ARTIST's depend on the tool names)."""
        return list(self.stop_strings)

    def stops_at_turn_end(self, tools: list[dict]) -> bool:
        """Whether a turn runs to the end of the message (several calls per turn, Qwen's format) rather
        than stopping at each call: then the policy samples `turn_end` itself, before the responses."""
        return bool(self.turn_end) and self.turn_end in self.stops(tools)

    # --- response --------------------------------------------------------------------------------
    @abstractmethod
    def parse(self, text: str, *, tools: list[dict] | None = None) -> ParsedResponse:
        """Reasoning, tool calls, final answer and tags of an assistant text; never raises."""

    def format_ok(self, text: str) -> bool:
        """The template's tags are present, closed and in the order its grammar allows."""
        scan = scan_tags(text, self.format_tag_names(text), boxed_as=self.answer_tag)
        if not scan.well_formed:
            return False
        if any(call.parse_error for call in self.parse(text).tool_calls):
            return False
        return tags_match(self.normalise_tags(scan.tags), self.format_pattern)

    def format_tag_names(self, text: str) -> list[str]:
        return list(self.tag_names)

    def normalise_tags(self, tags: list[str]) -> list[str]:
        return tags

    # --- glue ------------------------------------------------------------------------------------
    @abstractmethod
    def render_tool_responses(self, results: list[ToolResult], *, turn_closed: bool = False) -> str:
        """Text appended after an assistant turn that called tools, up to the next assistant turn."""

    @abstractmethod
    def render_notice(self, text: str, *, turn_closed: bool = False) -> str:
        """Text that shows the policy a notice (e.g. ZeroTIR's tool-limit notice) and resumes it."""

    def close_turn(self, turn_closed: bool) -> str:
        return "" if turn_closed else self.turn_end


def tool_name(spec: dict) -> str:
    """The name in an OpenAI-style function spec (or a bare {"name": ...} spec)."""
    return spec.get("function", spec).get("name", "")


def tool_parameters(spec: dict) -> dict:
    return spec.get("function", spec).get("parameters", {}) or {}


TEMPLATES: Registry[type[ChatTemplate]] = Registry("chat template")
