"""The Qwen tool template and Tool-N1's: render, parse, format_ok and glue."""

from __future__ import annotations

import pytest

from trainers.templates import TEMPLATES
from trainers.trajectory import ToolResult

TOOLS = [{"type": "function", "function": {"name": "calculator", "description": "math", "parameters": {}}}]
SURVEY_TURN = (
    "<think> I need both lists. </think>\n"
    '<tool_call>\n{"name": "get_user_checked_out_books", "arguments": {"user_id": 1}}\n</tool_call>\n'
    '<tool_call>\n{"name": "search_books_by_author", "arguments": {"author": "Jane Doe"}}\n</tool_call>'
)


@pytest.fixture
def qwen():
    return TEMPLATES.get("qwen_tool")()


def test_registry_holds_the_five_template_families():
    assert TEMPLATES.names() == ["artist", "hf_native", "qwen_tool", "tool_n1", "torl"]


def test_qwen_prompt_has_tools_question_and_an_open_assistant_turn(qwen):
    prompt = qwen.render_prompt(question="What is 2+2?", tools=TOOLS)
    assert prompt.startswith("<|im_start|>system\nIn this environment you have access to a set of tools")
    assert '"name": "calculator"' in prompt and "\\boxed{}" in prompt
    assert prompt.endswith("<|im_start|>user\nWhat is 2+2?<|im_end|>\n<|im_start|>assistant\n")


def test_qwen_prompt_shows_an_environment_observation(qwen):
    prompt = qwen.render_prompt(question="Play", tools=TOOLS, observation="P_G")
    assert "Play\n\nCurrent state:\nP_G<|im_end|>" in prompt


def test_a_source_override_renders_instead_of_the_builtin(qwen):
    out = qwen.render_prompt(question="Q", tools=TOOLS, source="{{ tool_names | join(',') }}|{{ question }}")
    assert out == "calculator|Q"


def test_qwen_parses_the_survey_turn_with_two_calls(qwen):
    parsed = qwen.parse(SURVEY_TURN)
    assert parsed.reasoning == "I need both lists."
    assert [(c.name, c.arguments) for c in parsed.tool_calls] == [
        ("get_user_checked_out_books", {"user_id": 1}),
        ("search_books_by_author", {"author": "Jane Doe"}),
    ]
    assert parsed.tags == ["think", "tool_call", "tool_call"] and parsed.final_answer is None


def test_qwen_final_answer_is_the_last_boxed(qwen):
    parsed = qwen.parse("<think>ok</think> it is \\boxed{\\frac{1}{2}}")
    assert parsed.final_answer == "\\frac{1}{2}" and parsed.tags == ["think", "answer"]


def test_qwen_format_accepts_think_then_calls_and_a_whole_exchange(qwen):
    assert qwen.format_ok(SURVEY_TURN)
    whole = SURVEY_TURN + "<|im_end|>\n<|im_start|>user\n<tool_response>\n[]\n</tool_response><|im_end|>\n"
    assert qwen.format_ok(whole + "<|im_start|>assistant\n<think>done</think> \\boxed{none}")


@pytest.mark.parametrize(
    "text",
    [
        '<tool_call>{"name": "a", "arguments": {}}</tool_call><think>late</think>',  # call before thinking
        "<think>unclosed",
        "<think>x</think><tool_call>{bad json}</tool_call>",
        "<think>only thinking</think>",
    ],
)
def test_qwen_format_rejects(qwen, text):
    assert not qwen.format_ok(text)


def test_qwen_tool_responses_close_the_turn_and_open_the_next(qwen):
    results = [ToolResult("a", True, "1"), ToolResult("b", False, "NameError: x")]
    assert qwen.render_tool_responses(results) == (
        "<|im_end|>\n<|im_start|>user\n<tool_response>\n1\n</tool_response>\n"
        "<tool_response>\nNameError: x\n</tool_response><|im_end|>\n<|im_start|>assistant\n"
    )


def test_qwen_glue_skips_the_turn_end_the_policy_already_sampled(qwen):
    glue = qwen.render_tool_responses([ToolResult("a", True, "1")], turn_closed=True)
    assert glue.startswith("\n<|im_start|>user\n<tool_response>")


def test_qwen_notice_is_a_user_turn(qwen):
    expected = "<|im_end|>\n<|im_start|>user\nstop<|im_end|>\n<|im_start|>assistant\n"
    assert qwen.render_notice("stop") == expected


def test_qwen_and_tool_n1_stop_at_the_end_of_the_message_not_of_a_call(qwen):
    # one message may make several calls (Qwen's format); stopping at </tool_call> cut it after the first
    assert qwen.stops(TOOLS) == ["<|im_end|>"] and qwen.stops_at_turn_end(TOOLS)
    assert TEMPLATES.get("tool_n1")().stops(TOOLS) == ["<|im_end|>"]


def test_tool_n1_parses_a_list_of_calls_and_an_answer_tag():
    n1 = TEMPLATES.get("tool_n1")()
    calls = '[{"name": "a", "arguments": {"x": 1}}, {"name": "b", "arguments": {}}]'
    text = f"<think>r</think><tool_call>{calls}</tool_call>"
    assert [c.name for c in n1.parse(text).tool_calls] == ["a", "b"]
    assert n1.format_ok(text)
    assert n1.parse("<think>r</think><answer>7</answer>").final_answer == "7"
    assert "json list of function calls" in n1.render_prompt(question="q", tools=TOOLS)


def test_tool_n1_format_wants_one_think_then_one_call_tag():
    n1 = TEMPLATES.get("tool_n1")()
    one = '<tool_call>{"name": "a", "arguments": {}}</tool_call>'
    two_tags = "<think>r</think>" + one + one
    assert not n1.format_ok(two_tags)
    assert not n1.format_ok('<tool_call>[{"name": "a", "arguments": {}}]</tool_call>')
