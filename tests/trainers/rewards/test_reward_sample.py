import pytest

from trainers.rewards import score_text

DEFINITION = {
    "components": [
        {"name": "correctness"},
        {"name": "format", "weight": 0.5},
        {"name": "overlong", "params": {"max_length": 40, "cache_length": 10}},
    ]
}
TEXT = (
    '<think>add them</think>\n<tool_call>\n{"name": "calculator", "arguments": {"expression": "2+3"}}\n'
    "</tool_call>\n<think>got 5</think> \\boxed{5}"
)


def test_scores_each_component_and_the_total():
    out = score_text(DEFINITION, TEXT, {"answer": "5"}, "qwen_tool")
    assert out["components"] == {"correctness": 1.0, "format": 1.0, "overlong": 0.0}
    assert out["weights"] == {"correctness": 1.0, "format": 0.5, "overlong": 1.0}
    assert out["total"] == pytest.approx(1.5)


def test_the_template_parser_supplies_answer_and_calls():
    definition = {"components": [{"name": "otc", "params": {"variant": "ppo"}}]}
    # one call, cos(pi / 3) = 0.5
    assert score_text(definition, TEXT, {"answer": "5"}, "qwen_tool")["total"] == pytest.approx(0.5)


def test_tool_results_and_token_counts_can_be_given():
    definition = {
        "components": [
            {"name": "artist", "params": {"tool_tags": ["tool_call"]}},
            DEFINITION["components"][2],
        ]
    }
    results = [{"name": "calculator", "ok": False, "output": "error"}]
    out = score_text(
        definition, TEXT, {"answer": "5"}, "qwen_tool", results, encode=lambda t: list(t.encode())
    )
    assert out["components"]["artist/tool"] == 0.0
    assert out["components"]["overlong"] == -1.0  # far more than 40 bytes


def test_a_wrong_answer_scores_zero_correctness():
    out = score_text(DEFINITION, TEXT.replace("{5}", "{6}"), {"answer": "5"}, "qwen_tool")
    assert out["components"]["correctness"] == 0.0
