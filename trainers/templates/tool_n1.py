"""Tool-N1's template (arXiv 2505.00024): `<think>…</think>` then `<tool_call>[…]</tool_call>` per step."""

from __future__ import annotations

from trainers.parsing.answers import extract_boxed, extract_tag
from trainers.parsing.response import ParsedResponse
from trainers.templates.base import TEMPLATES
from trainers.templates.chatml import ChatMLToolTemplate

TOOL_N1_PROMPT = """<|im_start|>system
You are an expert in composing functions. You are given a question and a set of possible functions. \
Based on the question, you will need to make one or more function/tool calls to achieve the purpose. \
If none of the functions can be used, point it out and give your final answer.

Here is a list of functions in JSON format that you can invoke:
{{ tools_json }}

In each action step, you MUST:
1. Think about the reasoning process in the mind and enclose your reasoning within <think> </think> XML tags.
2. Then, provide a json list of function calls with names and arguments within <tool_call></tool_call> \
XML tags, i.e., <tool_call>[{"name": <function-name>, "arguments": <args-json-object>}, ...]</tool_call>
3. Make sure both the reasoning and the tool call steps are included together in one single reply.
When you have the final answer, write it within <answer></answer> tags instead of calling a \
function.<|im_end|>
<|im_start|>user
{{ question }}{% if observation %}

Current state:
{{ observation }}{% endif %}<|im_end|>
<|im_start|>assistant
"""


@TEMPLATES.register("tool_n1")
class ToolN1Template(ChatMLToolTemplate):
    """Exactly one think span and one call tag (holding a JSON list) per step; the answer in `<answer>`."""

    name = "tool_n1"
    prompt_source = TOOL_N1_PROMPT
    tag_names = ["think", "tool_call", "tool_response", "answer"]
    answer_tag = None
    format_pattern = r"(?:think tool_call (?:tool_response )*)*think (?:tool_call |answer )"

    def parse(self, text: str, *, tools: list[dict] | None = None) -> ParsedResponse:
        parsed = super().parse(text, tools=tools)
        parsed.final_answer = extract_tag(text, "answer") or extract_boxed(text)
        return parsed
