"""ToRL's code-block template and ARTIST's tag template."""

from __future__ import annotations

import pytest

from trainers.templates import TEMPLATES
from trainers.trajectory import ToolResult


def spec(name: str, param: str) -> dict:
    return {"name": name, "description": name, "parameters": {"properties": {param: {"type": "string"}}}}


PYTHON, SEARCH = spec("python", "code"), spec("search", "query")


@pytest.fixture
def torl():
    return TEMPLATES.get("torl")()


@pytest.fixture
def artist():
    return TEMPLATES.get("artist")()


def test_torl_prompt_asks_for_programs_and_a_boxed_answer(torl):
    prompt = torl.render_prompt(question="1+1?", tools=[PYTHON])
    assert "User: 1+1?" in prompt and "integrate natural language reasoning with programs" in prompt
    assert prompt.endswith("Assistant: ")


def test_torl_stops_at_the_closing_fence_not_the_opening_one(torl):
    (stop,) = torl.stops([PYTHON])
    assert stop not in "```python\n" and stop in "x = 1\n```\n"


def test_torl_a_closed_python_block_is_a_call_to_the_code_tool(torl):
    parsed = torl.parse("Compute:\n```python\nprint(2 + 2)\n```\n", tools=[PYTHON])
    assert [(c.name, c.arguments) for c in parsed.tool_calls] == [("python", {"code": "print(2 + 2)\n"})]


def test_torl_an_unclosed_block_is_malformed(torl):
    (call,) = torl.parse("```python\nprint(1)").tool_calls
    assert call.parse_error == "missing closing ``` of the python block"


def test_torl_output_block_and_answer(torl):
    assert torl.render_tool_responses([ToolResult("python", True, "4")]) == "```output\n4\n```\n"
    text = "```python\nprint(4)\n```\n```output\n4\n```\nSo \\boxed{4}."
    parsed = torl.parse(text)
    assert parsed.final_answer == "4" and parsed.tags == ["python", "output", "answer"]
    assert torl.format_ok(text) and not torl.format_ok("no answer")


def test_artist_stops_at_each_tools_closing_tag(artist):
    assert artist.stops([PYTHON, SEARCH]) == ["</python>", "</search>"]


def test_artist_prompt_lists_the_tools_with_their_tag(artist):
    prompt = artist.render_prompt(question="q", tools=[PYTHON])
    assert "<python> input </python>" in prompt and "<answer>" in prompt


def test_artist_raw_tag_body_fills_the_single_parameter_and_json_is_arguments(artist):
    text = '<think>a</think><python>print(1)</python><output>1</output><search>{"query": "x"}</search>'
    calls = artist.parse(text, tools=[PYTHON, SEARCH]).tool_calls
    assert [(c.name, c.arguments) for c in calls] == [
        ("python", {"code": "print(1)"}),
        ("search", {"query": "x"}),
    ]


def test_artist_answer_and_format(artist):
    text = "<think>a</think><python>1</python><output>1</output><think>b</think><answer>\\boxed{1}</answer>"
    parsed = artist.parse(text, tools=[PYTHON])
    assert parsed.final_answer == "1" and parsed.tags == ["think", "python", "output", "think", "answer"]
    assert artist.format_ok(text)
    assert not artist.format_ok("<answer>1</answer><think>late</think>")


def test_artist_an_unclosed_tool_tag_is_malformed(artist):
    calls = artist.parse("<think>a</think><python>print(", tools=[PYTHON]).tool_calls
    assert [c.parse_error for c in calls] == ["missing closing </python> tag"]


def test_artist_output_glue(artist):
    assert artist.render_tool_responses([ToolResult("python", True, "1")]) == "\n<output>\n1\n</output>\n"
