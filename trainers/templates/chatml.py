"""Shared ChatML pieces for the Qwen-style templates: tool responses come back in a user turn."""

from __future__ import annotations

from trainers.parsing.answers import extract_boxed
from trainers.parsing.reasoning import extract_reasoning
from trainers.parsing.response import ParsedResponse
from trainers.parsing.tags import scan_tags
from trainers.parsing.tool_calls import parse_tagged_calls
from trainers.templates.base import ChatTemplate
from trainers.trajectory import ToolResult


class ChatMLToolTemplate(ChatTemplate):
    """`<think>` reasoning, JSON calls in `<tool_call>` tags, `<tool_response>` in a user turn.

    Generation stops at the end of the message, not at `</tool_call>`: one message may hold several
    call blocks (Qwen's own format), and the next user turn answers each with its own `<tool_response>`,
    in call order.
    """

    turn_end = "<|im_end|>"
    tag_names = ["think", "tool_call", "tool_response"]

    def stops(self, tools: list[dict]) -> list[str]:
        # the instance's turn end: hf_native takes its tokenizer's end-of-sequence token
        return [self.turn_end] if self.turn_end else []

    def parse(self, text: str, *, tools: list[dict] | None = None) -> ParsedResponse:
        return ParsedResponse(
            reasoning=extract_reasoning(text),
            tool_calls=parse_tagged_calls(text),
            final_answer=extract_boxed(text),
            tags=scan_tags(text, self.tag_names, boxed_as=self.answer_tag).tags,
        )

    def user_turn(self, body: str, turn_closed: bool) -> str:
        return f"{self.close_turn(turn_closed)}\n<|im_start|>user\n{body}<|im_end|>\n<|im_start|>assistant\n"

    def render_tool_responses(self, results: list[ToolResult], *, turn_closed: bool = False) -> str:
        body = "\n".join(f"<tool_response>\n{r.output}\n</tool_response>" for r in results)
        return self.user_turn(body, turn_closed)

    def render_notice(self, text: str, *, turn_closed: bool = False) -> str:
        return self.user_turn(text, turn_closed)
