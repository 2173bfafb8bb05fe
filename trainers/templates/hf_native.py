"""The tokenizer's own chat template, given the tools when it accepts them (Qwen2.5, Hermes, ...)."""

from __future__ import annotations

from typing import Any

from trainers.templates.base import TEMPLATES
from trainers.templates.chatml import ChatMLToolTemplate
from trainers.templates.qwen_tool import QWEN_TOOL_PROMPT
from trainers.trajectory import ToolResult

_SPLIT = "\u2063SPLIT\u2063"  # a marker no chat template produces, to cut rendered glue out


@TEMPLATES.register("hf_native")
class HFNativeTemplate(ChatMLToolTemplate):
    """Calls are parsed as `<tool_call>` JSON (the Hermes/Qwen convention most tool-aware templates use).

    A tokenizer whose template ignores tools gets the survey's tool instructions as a system message.
    """

    name = "hf_native"
    prompt_source = QWEN_TOOL_PROMPT
    format_pattern = (
        r"(?:think )?(?:(?:tool_call )+(?:tool_response )*(?:think )?)*(?:(?:tool_call )+|answer )"
    )

    def __init__(self, *, tokenizer: Any = None) -> None:
        super().__init__(tokenizer=tokenizer)
        if tokenizer is not None and tokenizer.eos_token:
            self.turn_end = tokenizer.eos_token

    def render_prompt(
        self,
        *,
        question: str,
        tools: list[dict],
        observation: str | None = None,
        source: str | None = None,
        tokenizer: Any = None,
    ) -> str:
        tok = tokenizer or self.tokenizer
        if source is not None or tok is None or not getattr(tok, "chat_template", None):
            return super().render_prompt(
                question=question, tools=tools, observation=observation, source=source
            )
        content = question if not observation else f"{question}\n\nCurrent state:\n{observation}"
        messages = [{"role": "user", "content": content}]
        if self.supports_tools(tok):
            return tok.apply_chat_template(
                messages, tools=tools or None, add_generation_prompt=True, tokenize=False
            )
        system = self.system_text(tools)
        messages.insert(0, {"role": "system", "content": system})
        return tok.apply_chat_template(messages, add_generation_prompt=True, tokenize=False)

    @staticmethod
    def supports_tools(tok: Any) -> bool:
        return "tools" in (tok.chat_template or "")

    def system_text(self, tools: list[dict]) -> str:
        """The survey's system instructions alone, for templates with no tools support."""
        full = super().render_prompt(question=_SPLIT, tools=tools)
        return full.split("<|im_start|>system\n", 1)[1].split("<|im_end|>", 1)[0]

    def render_messages(self, messages: list[dict], tools: list[dict]) -> str:
        """The tokenizer's own template over the conversation, given the tools when it accepts them."""
        tok = self.tokenizer
        if tok is None or not getattr(tok, "chat_template", None):
            return super().render_messages(messages, tools)
        convo = [hf_message(m) for m in messages]
        if tools and not self.supports_tools(tok):
            convo.insert(0, {"role": "system", "content": self.system_text(tools)})
            tools = []
        return tok.apply_chat_template(convo, tools=tools or None, add_generation_prompt=True, tokenize=False)

    def render_followup(self, messages: list[dict], *, turn_closed: bool) -> str:
        if self.tokenizer is None or not getattr(self.tokenizer, "chat_template", None):
            return super().render_followup(messages, turn_closed=turn_closed)
        return self.glue([hf_message(m) for m in messages], turn_closed)

    def render_tool_responses(self, results: list[ToolResult], *, turn_closed: bool = False) -> str:
        if self.tokenizer is None or not getattr(self.tokenizer, "chat_template", None):
            return super().render_tool_responses(results, turn_closed=turn_closed)
        tool_msgs = [{"role": "tool", "name": r.name, "content": r.output} for r in results]
        return self.glue(tool_msgs, turn_closed)

    def render_notice(self, text: str, *, turn_closed: bool = False) -> str:
        if self.tokenizer is None or not getattr(self.tokenizer, "chat_template", None):
            return super().render_notice(text, turn_closed=turn_closed)
        return self.glue([{"role": "user", "content": text}], turn_closed)

    def glue(self, messages: list[dict], turn_closed: bool) -> str:
        """What the chat template puts between an assistant message and the next assistant turn."""
        convo = [{"role": "user", "content": "q"}, {"role": "assistant", "content": _SPLIT}, *messages]
        text = self.tokenizer.apply_chat_template(convo, add_generation_prompt=True, tokenize=False)
        glue = text.split(_SPLIT, 1)[1]
        if turn_closed and self.turn_end and glue.startswith(self.turn_end):
            glue = glue[len(self.turn_end) :]
        return glue


def hf_message(message: dict) -> dict:
    """A normalised message in the shape Hugging Face chat templates read (calls as function dicts)."""
    out = {"role": message["role"], "content": message.get("content") or ""}
    if message.get("tool_calls"):
        out["tool_calls"] = [
            {"type": "function", "function": {"name": c["name"], "arguments": c["arguments"]}}
            for c in message["tool_calls"]
        ]
    if message.get("name"):
        out["name"] = message["name"]
    return out
