import json

from workbench.datasets.limits import UploadLimits
from workbench.datasets.rows import RowData, validate_record


def _validate(where, fields):
    return validate_record(where, fields, UploadLimits.from_settings())


def _messages(result):
    return [str(e) for e in result]


def test_question_and_answer_row():
    row = _validate("line 1", {"question": "2+2?", "answer": 4, "level": "easy"})
    assert row == RowData(prompt="2+2?", answer="4", metadata={"level": "easy"})


def test_answer_required_when_tool_calls_absent():
    assert _messages(_validate("row 3", {"prompt": "hi"})) == [
        "row 3, field answer: required when tool_calls is absent"
    ]


def test_missing_prompt_is_reported_with_other_field_errors():
    result = _validate("line 2", {"answer": ["x"]})
    assert _messages(result) == [
        "line 2, field prompt: required: a non-empty text in 'prompt' or 'question'",
        "line 2, field answer: must be text or a number, got list",
    ]


def test_tool_calls_from_csv_json_text_with_string_arguments():
    arguments = json.dumps({"expression": "1+1"})
    calls = json.dumps([{"type": "function", "function": {"name": "calc", "arguments": arguments}}])
    row = _validate("row 1", {"prompt": "p", "tool_calls": calls})
    assert row.tool_calls == [{"name": "calc", "arguments": {"expression": "1+1"}}]
    assert row.answer is None


def test_bad_tool_call_fields_are_named():
    result = _validate("line 4", {"prompt": "p", "tool_calls": [{"arguments": 3}, "x"]})
    assert _messages(result) == [
        "line 4, field tool_calls[0].name: required: the tool's name",
        "line 4, field tool_calls[0].arguments: must be a JSON object",
        "line 4, field tool_calls[1]: must be an object with name and arguments",
    ]


def test_invalid_tool_calls_json_text():
    result = _validate("row 2", {"prompt": "p", "tool_calls": "[{"})
    assert _messages(result)[0].startswith("row 2, field tool_calls: invalid JSON:")


def test_initial_state_and_metadata_decode_json_text():
    row = _validate(
        "row 1", {"prompt": "p", "answer": "a", "initial_state": '{"grid": [1]}', "metadata": '{"src": "x"}'}
    )
    assert row.initial_state == {"grid": [1]}
    assert row.metadata == {"src": "x"}


def test_metadata_must_be_an_object():
    assert _messages(_validate("line 1", {"prompt": "p", "answer": "a", "metadata": [1]})) == [
        "line 1, field metadata: must be a JSON object"
    ]
