"""Tool-call, reasoning and answer parsing edge cases."""

from __future__ import annotations

from trainers.parsing.answers import extract_boxed, extract_tag
from trainers.parsing.reasoning import extract_reasoning
from trainers.parsing.tags import scan_tags
from trainers.parsing.tool_calls import UNKNOWN_TOOL, called_name, parse_tagged_calls


def test_one_json_object_is_one_call():
    calls = parse_tagged_calls('<tool_call>{"name": "calc", "arguments": {"x": 1}}</tool_call>')
    assert [(c.name, c.arguments, c.parse_error) for c in calls] == [("calc", {"x": 1}, None)]


def test_a_json_list_in_one_tag_is_several_calls_in_order():
    text = '<tool_call>[{"name": "a", "arguments": {}}, {"name": "b", "arguments": {"k": "v"}}]</tool_call>'
    assert [(c.name, c.arguments) for c in parse_tagged_calls(text)] == [("a", {}), ("b", {"k": "v"})]


def test_several_tags_in_one_turn_are_all_parsed():
    one = '<tool_call>{"name": "%s", "arguments": {}}</tool_call>'
    text = one % "a" + "\n" + one % "b"
    assert [c.name for c in parse_tagged_calls(text)] == ["a", "b"]


def test_malformed_json_becomes_a_call_with_a_parse_error_saying_where():
    (call,) = parse_tagged_calls('<tool_call>{"name": "a", "arguments": {x}}</tool_call>')
    assert call.parse_error is not None and call.parse_error.startswith("invalid JSON")
    assert "column" in call.parse_error and call.raw == '{"name": "a", "arguments": {x}}'


def test_missing_closing_tag_is_a_malformed_call():
    (call,) = parse_tagged_calls('<tool_call>{"name": "a", "arguments": {}}')
    assert call.parse_error == "missing closing </tool_call> tag"


def test_call_without_a_name_is_malformed():
    (call,) = parse_tagged_calls('<tool_call>{"arguments": {}}</tool_call>')
    assert call.parse_error == "the tool call has no 'name' string"


def test_arguments_that_are_not_an_object_are_malformed():
    (call,) = parse_tagged_calls('<tool_call>{"name": "a", "arguments": [1, 2]}</tool_call>')
    assert call.name == "a" and call.parse_error == "'arguments' must be a JSON object, got list"


def test_arguments_encoded_as_a_json_string_are_decoded():
    (call,) = parse_tagged_calls('<tool_call>{"name": "a", "arguments": "{\\"q\\": 2}"}</tool_call>')
    assert call.arguments == {"q": 2} and call.parse_error is None


def test_empty_tag_is_malformed():
    (call,) = parse_tagged_calls("<tool_call>  </tool_call>")
    assert call.parse_error == "empty tool call"


def test_no_tags_no_calls():
    assert parse_tagged_calls("just text \\boxed{3}") == []


def test_boxed_with_nested_braces():
    assert extract_boxed("so \\boxed{\\frac{1}{2}} done") == "\\frac{1}{2}"


def test_the_last_boxed_answer_counts():
    assert extract_boxed("first \\boxed{1}, then \\boxed{2}") == "2"


def test_unbalanced_boxed_is_no_answer():
    assert extract_boxed("\\boxed{1") is None


def test_answer_tag_content():
    assert extract_tag("<think>x</think><answer> 42 </answer>", "answer") == "42"


def test_reasoning_joins_think_spans():
    assert extract_reasoning("<think>a</think> x <think>b</think>") == "a\n\nb"


def test_reasoning_before_a_lone_closing_think():
    assert extract_reasoning("started in the prompt</think> answer") == "started in the prompt"


def test_scan_tags_orders_tags_and_flags_unclosed_ones():
    scan = scan_tags(
        "<think>a</think><tool_call>{}</tool_call> \\boxed{1}", ["think", "tool_call"], boxed_as="answer"
    )
    assert scan.tags == ["think", "tool_call", "answer"] and scan.well_formed
    assert not scan_tags("<think>a", ["think"]).well_formed


def test_malformed_blocks_among_valid_ones_each_become_their_own_call_in_order():
    one = '<tool_call>{"name": "%s", "arguments": {}}</tool_call>'
    text = one % "a" + "<tool_call>{oops}</tool_call>" + one % "b" + "<tool_call>{"
    calls = parse_tagged_calls(text)
    assert [(c.name, c.parse_error is None) for c in calls] == [
        ("a", True),
        ("", False),
        ("b", True),
        ("", False),
    ]


def test_nesting_too_deep_for_the_json_decoder_is_a_malformed_call_not_an_exception():
    (call,) = parse_tagged_calls("<tool_call>" + "[" * 100_000 + "</tool_call>")
    assert call.parse_error == "invalid JSON: RecursionError"
    deep_args = '{"name": "a", "arguments": "' + "[" * 100_000 + '"}'
    (call,) = parse_tagged_calls(f"<tool_call>{deep_args}</tool_call>")
    assert call.name == "a" and call.parse_error.startswith("'arguments' is not valid JSON")


def test_called_name_reads_the_name_of_a_broken_block_or_says_unknown_tool():
    blocks = [
        '<tool_call>{"name": "search", "arguments": {"q": }}</tool_call>',
        '<tool_call>{"arguments": {}, "name" : "calc\\u0075lator"</tool_call>',  # unclosed, escaped
        "<tool_call>not json</tool_call>",
        '<tool_call>{"name": "", "arguments": [}</tool_call>',
        '<tool_call>{"name": "bad \\q escape", "arguments": [}</tool_call>',
        '<tool_call>{"name": "python", "arguments": {"code": "1"}}</tool_call>',
    ]
    names = [called_name(call) for text in blocks for call in parse_tagged_calls(text)]
    assert names == ["search", "calculator", UNKNOWN_TOOL, UNKNOWN_TOOL, UNKNOWN_TOOL, "python"]
