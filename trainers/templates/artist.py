"""ARTIST's template (arXiv 2505.01441): `<think>`, a tag per tool (`<python>`), `<output>`, `<answer>`."""

from __future__ import annotations

import json
import re

from trainers.parsing.answers import extract_boxed, extract_tag
from trainers.parsing.json_limits import too_deep
from trainers.parsing.reasoning import extract_reasoning
from trainers.parsing.response import ParsedResponse
from trainers.parsing.tags import scan_tags
from trainers.templates.base import TEMPLATES, ChatTemplate, tool_name, tool_parameters
from trainers.trajectory import ToolCall, ToolResult

ARTIST_PROMPT = """<|im_start|>system
You are a helpful assistant that solves the given question step by step with the help of tools. \
You first think about the reasoning process in the mind and then provide the answer. The reasoning \
process is enclosed within <think> </think> tags and the final answer within <answer> </answer> tags. \
To call a tool, write its input within the tool's tags; its result is then given to you within \
<output> </output> tags. Available tools (the tag is the tool's name):
{{ tools_json }}
For example: <think> reasoning </think> <{{ tool_names[0] if tool_names else "python" }}> input \
</{{ tool_names[0] if tool_names else "python" }}> <output> result </output> <think> reasoning </think> \
<answer> final answer </answer><|im_end|>
<|im_start|>user
{{ question }}{% if observation %}

Current state:
{{ observation }}{% endif %}<|im_end|>
<|im_start|>assistant
"""

RESERVED = ("think", "answer", "output")
_ANY_TAG = re.compile(r"<([A-Za-z_][\w\-]*)>(.*?)</\1>", re.DOTALL)


@TEMPLATES.register("artist")
class ArtistTemplate(ChatTemplate):
    """The tool's input is a JSON object of arguments, or raw text for the tool's one string parameter."""

    name = "artist"
    prompt_source = ARTIST_PROMPT
    turn_end = "<|im_end|>"
    answer_tag = None
    format_pattern = r"think (?:tool (?:output )?(?:think )?)*(?:tool (?:output )?|answer )"

    def stops(self, tools: list[dict]) -> list[str]:
        return [f"</{tool_name(t)}>" for t in tools]

    def parse(self, text: str, *, tools: list[dict] | None = None) -> ParsedResponse:
        specs = {tool_name(t): t for t in tools or []}
        calls = [
            ToolCall(name, tool_arguments(body.strip(), specs.get(name)), body)
            for name, body in _ANY_TAG.findall(text)
            if name not in RESERVED and (not specs or name in specs)
        ]
        for name in specs:  # a tool tag opened last and never closed: cut off mid-call
            opened, closed = text.rfind(f"<{name}>"), text.rfind(f"</{name}>")
            if opened > closed:
                calls.append(ToolCall(name, {}, text[opened:], f"missing closing </{name}> tag"))
        answer = extract_tag(text, "answer")
        if answer is not None:
            answer = extract_boxed(answer) or answer
        names = self.format_tag_names(text)
        return ParsedResponse(extract_reasoning(text), calls, answer, scan_tags(text, names).tags)

    def format_tag_names(self, text: str) -> list[str]:
        return list(RESERVED) + sorted({name for name, _ in _ANY_TAG.findall(text)} - set(RESERVED))

    def normalise_tags(self, tags: list[str]) -> list[str]:
        return [t if t in RESERVED else "tool" for t in tags]

    def render_tool_responses(self, results: list[ToolResult], *, turn_closed: bool = False) -> str:
        return "".join(f"\n<output>\n{r.output}\n</output>\n" for r in results)

    def render_notice(self, text: str, *, turn_closed: bool = False) -> str:
        return f"\n<output>\n{text}\n</output>\n"


def tool_arguments(body: str, spec: dict | None) -> dict:
    """A JSON object body is the arguments; otherwise the body fills the tool's single string parameter."""
    if body.startswith("{"):
        try:
            value = json.loads(body)
        except (ValueError, RecursionError):  # RecursionError: nested too deep for the decoder
            value = None
        if isinstance(value, dict) and not too_deep(value):  # deeper ones stay text, not a recursion bomb
            return value
    props = list(tool_parameters(spec or {}).get("properties", {}))
    return {props[0] if len(props) == 1 else "code": body}
