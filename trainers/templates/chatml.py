"""Shared ChatML pieces for the Qwen-style templates: tool responses come back in a user turn."""

from __future__ import annotations

import json

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

    # --- whole conversations (the agent endpoint) --------------------------------------------------
    def render_messages(self, messages: list[dict], tools: list[dict]) -> str:
        """An OpenAI-style conversation as the prompt of its next assistant turn: the template's tool
        instructions (when there are tools), then the conversation's own system text, then its turns.
        `messages` are normalised (trainers.agent.messages): role, content, tool_calls."""
        system = [m["content"] for m in messages if m["role"] == "system"]
        if tools:
            system.insert(0, self.system_text(tools))
        head = f"<|im_start|>system\n{chr(10).join(system)}<|im_end|>\n" if system else ""
        rest = [m for m in messages if m["role"] != "system"]
        return head + self.render_turns(rest) + "<|im_start|>assistant\n"

    def render_followup(self, messages: list[dict], *, turn_closed: bool) -> str:
        """The tool and user messages that follow an assistant turn, up to the next assistant turn: for
        tool messages exactly the glue the built-in rollouts append (`render_tool_responses`)."""
        return f"{self.close_turn(turn_closed)}\n{self.render_turns(messages)}<|im_start|>assistant\n"

    def system_text(self, tools: list[dict]) -> str:
        """The system instructions of the template's own prompt, with these tools."""
        full = self.render_prompt(question="", tools=tools)
        return full.split("<|im_start|>system\n", 1)[1].split("<|im_end|>", 1)[0]

    def render_turns(self, messages: list[dict]) -> str:
        """ChatML turns; consecutive tool messages share one user turn of `<tool_response>` blocks."""
        out: list[str] = []
        responses: list[str] = []
        for message in [*messages, None]:
            if message is not None and message["role"] == "tool":
                responses.append(f"<tool_response>\n{message['content']}\n</tool_response>")
                continue
            if responses:
                out.append("<|im_start|>user\n" + "\n".join(responses) + "<|im_end|>\n")
                responses = []
            if message is not None:
                out.append(f"<|im_start|>{message['role']}\n{self.message_text(message)}<|im_end|>\n")
        return "".join(out)

    @staticmethod
    def message_text(message: dict) -> str:
        """A message's content, then its calls as `<tool_call>` JSON blocks."""
        calls = [
            "<tool_call>\n" + json.dumps({"name": c["name"], "arguments": c["arguments"]}) + "\n</tool_call>"
            for c in message.get("tool_calls") or []
        ]
        return "\n".join(part for part in [message.get("content") or "", *calls] if part)
