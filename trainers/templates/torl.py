"""ToRL's code-block template (arXiv 2503.23383): a python block runs when it closes; output follows it."""

from __future__ import annotations

import re

from trainers.parsing.answers import extract_boxed
from trainers.parsing.response import ParsedResponse
from trainers.templates.base import TEMPLATES, ChatTemplate, tool_name
from trainers.trajectory import ToolCall, ToolResult

TORL_PROMPT = """A conversation between User and Assistant. \
The user asks a question, and the Assistant solves it. \
The Assistant may write Python code in ```python blocks; each block is executed when it closes and its \
result is shown in an ```output block.
User: {{ question }}{% if observation %}
Current state:
{{ observation }}{% endif %}
Please integrate natural language reasoning with programs to solve the problem above, and put your final \
answer within \\boxed{}.
Assistant: """

_BLOCK = re.compile(r"```python[ \t]*\n(.*?)```", re.DOTALL)
_OPEN = "```python"
_TAGS = re.compile(r"```python[ \t]*\n.*?```|```output\n.*?```|\\(?:boxed|fbox)\s*\{", re.DOTALL)


@TEMPLATES.register("torl")
class ToRLTemplate(ChatTemplate):
    """Every closed python block is a call to the code tool (`python`, argument `code`)."""

    name = "torl"
    # The closing fence ends generation; "```python\n" never contains it, so the opener cannot stop it.
    stop_strings = ["```\n"]
    prompt_source = TORL_PROMPT
    format_pattern = r"(?:python (?:output )?)*answer "
    code_tool = "python"

    def parse(self, text: str, *, tools: list[dict] | None = None) -> ParsedResponse:
        name = self.code_tool_name(tools)
        calls = [ToolCall(name, {"code": code}, code) for code in _BLOCK.findall(text)]
        tail = text[text.rfind(_OPEN) :] if _OPEN in text else ""
        if tail and not _BLOCK.search(tail):
            calls.append(ToolCall(name, {}, tail, "missing closing ``` of the python block"))
        return ParsedResponse(
            reasoning=None, tool_calls=calls, final_answer=extract_boxed(text), tags=self.tags(text)
        )

    def tags(self, text: str) -> list[str]:
        out = []
        for match in _TAGS.finditer(text):
            token = match.group(0)
            out.append(
                "python" if token.startswith(_OPEN) else "output" if token.startswith("```o") else "answer"
            )
        return out

    def format_ok(self, text: str) -> bool:
        parsed = self.parse(text)
        return not any(c.parse_error for c in parsed.tool_calls) and (
            re.fullmatch(self.format_pattern, "".join(t + " " for t in parsed.tags)) is not None
        )

    def code_tool_name(self, tools: list[dict] | None) -> str:
        names = [tool_name(t) for t in tools or []]
        return self.code_tool if self.code_tool in names or not names else names[0]

    def render_tool_responses(self, results: list[ToolResult], *, turn_closed: bool = False) -> str:
        return "".join(f"```output\n{r.output}\n```\n" for r in results)

    def render_notice(self, text: str, *, turn_closed: bool = False) -> str:
        return f"```output\n{text}\n```\n"
