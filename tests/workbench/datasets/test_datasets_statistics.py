from workbench.datasets.statistics import FieldStatistics


def test_statistics_per_field():
    stats = FieldStatistics()
    stats.add({"question": "ab", "answer": 3})
    stats.add({"question": "abcd", "answer": 5.5, "tags": ["x", "y", "z"]})
    stats.add({"question": "abcdef", "answer": "seven"})
    result = stats.result()
    assert result["rows"] == 3
    question, answer, tags = (result["fields"][k] for k in ("question", "answer", "tags"))
    assert question == {
        "present": 3,
        "types": {"string": 3},
        "example": "ab",
        "numeric": None,
        "length": {"min": 2.0, "max": 6.0, "mean": 4.0},
    }
    assert answer["types"] == {"integer": 1, "number": 1, "string": 1}
    assert answer["numeric"] == {"min": 3.0, "max": 5.5, "mean": 4.25}
    assert answer["length"] == {"min": 5.0, "max": 5.0, "mean": 5.0}
    assert tags["present"] == 1 and tags["length"]["mean"] == 3.0


def test_booleans_are_not_numbers():
    stats = FieldStatistics()
    stats.add({"ok": True})
    assert stats.result()["fields"]["ok"]["numeric"] is None


def test_examples_of_lists_and_objects_are_json_not_python():
    stats = FieldStatistics()
    stats.add({"tool_calls": [{"name": "calculator", "ok": True, "note": None}], "answer": 4})
    fields = stats.result()["fields"]
    assert fields["tool_calls"]["example"] == '[{"name": "calculator", "ok": true, "note": null}]'
    assert fields["answer"]["example"] == "4"
