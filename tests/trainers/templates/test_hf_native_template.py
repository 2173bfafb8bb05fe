"""The tokenizer's own chat template, with and without tools support."""

from __future__ import annotations

import copy

from trainers.templates import TEMPLATES
from trainers.trajectory import ToolResult

TOOLS = [{"type": "function", "function": {"name": "calculator", "description": "math", "parameters": {}}}]


def test_a_template_without_tools_gets_the_tool_instructions_as_a_system_turn(tiny_tokenizer):
    native = TEMPLATES.get("hf_native")(tokenizer=tiny_tokenizer)
    prompt = native.render_prompt(question="2+2?", tools=TOOLS)
    assert prompt.startswith("<|im_start|>system\nIn this environment you have access")
    assert '"name": "calculator"' in prompt
    assert prompt.endswith("<|im_start|>user\n2+2?<|im_end|>\n<|im_start|>assistant\n")


def test_tool_glue_is_cut_from_the_chat_template(tiny_tokenizer):
    native = TEMPLATES.get("hf_native")(tokenizer=tiny_tokenizer)
    glue = native.render_tool_responses([ToolResult("calculator", True, "4")])
    assert glue == "<|im_end|>\n<|im_start|>tool\n4<|im_end|>\n<|im_start|>assistant\n"
    closed = native.render_tool_responses([ToolResult("calculator", True, "4")], turn_closed=True)
    assert closed == "\n<|im_start|>tool\n4<|im_end|>\n<|im_start|>assistant\n"


def test_a_tools_aware_chat_template_receives_the_tools(tiny_tokenizer):
    tok = copy.deepcopy(tiny_tokenizer)
    tok.chat_template = (
        "{% if tools %}TOOLS:{% for t in tools %}{{ t.function.name }};{% endfor %}\n{% endif %}"
        "{% for m in messages %}[{{ m.role }}]{{ m.content }}\n{% endfor %}"
        "{% if add_generation_prompt %}[assistant]{% endif %}"
    )
    native = TEMPLATES.get("hf_native")(tokenizer=tok)
    assert native.render_prompt(question="q", tools=TOOLS) == "TOOLS:calculator;[user]q\n[assistant]"


def test_native_calls_are_hermes_tool_call_tags(tiny_tokenizer):
    native = TEMPLATES.get("hf_native")(tokenizer=tiny_tokenizer)
    text = '<tool_call>{"name": "calculator", "arguments": {"expression": "2+2"}}</tool_call>'
    assert [c.name for c in native.parse(text).tool_calls] == ["calculator"]
    assert native.format_ok(text) and native.stops(TOOLS) == [tiny_tokenizer.eos_token]  # end of message
