import pytest

from trainers.rewards import REWARDS, RewardContext
from trainers.rewards.artist import format_ok
from trainers.trajectory import ToolCall, ToolResult

CTX = RewardContext()
GOOD = (
    "<think>compute</think><python>print(6*7)</python><output>42</output>"
    "<think>done</think><answer>\\boxed{42}</answer>"
)
OK = ToolResult("python", ok=True, output="42")
FAIL = ToolResult("python", ok=False, output="SyntaxError")
PY = ToolCall("python", {"code": "print(6*7)"})


def test_sub_scores_and_weighted_total(make_traj):
    artist = REWARDS.get("artist")()
    traj = make_traj(GOOD, {"answer": "42"}, calls=[PY], results=[OK, FAIL, OK, OK])
    assert artist.parts(traj, CTX) == {"answer": 1.0, "format": 1.0, "tool": 0.75}
    assert artist.score(traj, CTX) == pytest.approx(2.0 * 1 + 1.0 * 1 + 1.0 * 0.75)


def test_weights_are_parameters(make_traj):
    artist = REWARDS.get("artist")(answer_weight=1.0, format_weight=0.5, tool_weight=0.0)
    traj = make_traj(GOOD, {"answer": "41"}, calls=[PY], results=[OK])
    assert artist.score(traj, CTX) == pytest.approx(0.5)


def test_no_calls_give_zero_tool_score(make_traj):
    traj = make_traj("<think>x</think><answer>42</answer>", {"answer": "42"})
    assert REWARDS.get("artist")().parts(traj, CTX)["tool"] == 0.0


def test_format_requires_outputs_after_tools_and_one_final_answer():
    assert format_ok(GOOD, ["python"])
    assert not format_ok("<think>a</think><python>x</python><answer>1</answer>", ["python"])
    assert not format_ok("<python>x</python><output>1</output><answer>1</answer>", ["python"])
    assert not format_ok(GOOD + " trailing", ["python"])
    assert not format_ok("<think>a</think><answer>1</answer><answer>2</answer>", ["python"])


def test_format_ignores_a_sampled_end_of_turn_token():
    assert format_ok(GOOD + "<|im_end|>", ["python"])


def test_tool_tags_default_to_the_called_tools(make_traj):
    artist = REWARDS.get("artist")()
    assert artist.parts(make_traj(GOOD, {"answer": "42"}, calls=[PY]), CTX)["format"] == 1.0
    # no call parsed: the <python> block is not a tool block, so its <output> is out of place
    assert artist.parts(make_traj(GOOD, {"answer": "42"}), CTX)["format"] == 0.0
    fixed = REWARDS.get("artist")(tool_tags=["python"])
    assert fixed.parts(make_traj(GOOD, {"answer": "42"}), CTX)["format"] == 1.0
