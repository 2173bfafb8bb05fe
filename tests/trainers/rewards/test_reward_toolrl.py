import pytest

from trainers.rewards import REWARDS, RewardContext
from trainers.rewards.calls import Call, ground_truth_calls
from trainers.rewards.toolrl import best_matching, correctness_score, name_jaccard
from trainers.trajectory import ToolCall

CTX = RewardContext()


def call(name, **arguments):
    return Call(name, arguments)


def test_worked_example_with_a_spurious_call():
    # r_name = |{search, calc}| / |{search, calc, calc}| = 2/3 (multiset); search pair: keys 2/2 + 1 value;
    # calc pair: keys 1/1 + 1 value; S = 2/3 + 2 + 2 = 14/3, S_max = 1 + 2 + (2 + 1) = 6
    truth = [call("search", query="paris weather", units="metric"), call("calc", expr="2+2")]
    pred = [
        call("search", query="paris weather", units="imperial"),
        call("calc", expr="2+2"),
        call("calc", expr="1"),
    ]
    assert correctness_score(truth, pred) == pytest.approx(6 * (14 / 3) / 6 - 3)


def test_matching_is_optimal_where_greedy_is_not():
    # G1-P1 = 2/3 + 2, G1-P2 = 1 + 1, G2-P1 = 1 + 3, G2-P2 = 2/3 + 1: greedy (G1 takes P1) gets 13/3,
    # the best matching (G1-P2, G2-P1) gets 6; S = 1 + 6 = 7, S_max = 1 + 2 + 5 = 8
    truth = [call("f", x=1, y=2), call("f", x=1, y=2, z=3)]
    pred = [call("f", x=1, y=2, z=3), call("f", x=1, y=0)]
    assert correctness_score(truth, pred) == pytest.approx(6 * 7 / 8 - 3)


def test_exact_calls_score_plus_three_and_no_calls_minus_three():
    truth = [call("f", x=1)]
    assert correctness_score(truth, [call("f", x=1)]) == pytest.approx(3.0)
    assert correctness_score(truth, []) == pytest.approx(-3.0)


def test_calls_to_other_tools_earn_no_parameter_credit():
    # r_name = 0, no same-name pair: S = 0
    assert correctness_score([call("f", x=1)], [call("g", x=1)]) == pytest.approx(-3.0)


def test_name_jaccard_counts_repeated_tools():
    assert name_jaccard(["a", "a"], ["a"]) == pytest.approx(0.5)
    assert name_jaccard([], []) == 1.0


def test_best_matching_handles_more_columns_than_rows():
    assert best_matching([[1.0, 5.0, 2.0]]) == 5.0


def traj_with(make_traj, text, calls, truth):
    return make_traj(text, truth, calls=calls)


TRUTH = {"tool_calls": [{"name": "f", "parameters": {"x": 1}}]}
GOOD = '<think>use f</think>\n<tool_call>\n{"name": "f", "arguments": {"x": 1}}\n</tool_call>'


def test_full_reward_is_format_plus_correctness(make_traj):
    traj = make_traj(GOOD, TRUTH, calls=[ToolCall("f", {"x": 1})])
    assert REWARDS.get("toolrl")().score(traj, CTX) == pytest.approx(4.0)


def test_format_needs_the_tags_the_truth_needs_in_order(make_traj):
    fmt = REWARDS.get("toolrl")(part="format")
    assert fmt.score(make_traj(GOOD, TRUTH), CTX) == 1.0
    assert fmt.score(make_traj(GOOD, {**TRUTH, "response": "done"}), CTX) == 0.0
    swapped = '<tool_call>{"name": "f", "arguments": {"x": 1}}</tool_call><think>x</think>'
    assert fmt.score(make_traj(swapped, TRUTH), CTX) == 0.0
    assert fmt.score(make_traj(GOOD + "<response>done</response>", {**TRUTH, "response": "done"}), CTX) == 1.0


def test_malformed_call_gets_the_minimum(make_traj):
    bad = ToolCall("f", {}, raw="{oops", parse_error="invalid JSON")
    traj = make_traj(GOOD, TRUTH, calls=[bad])
    assert REWARDS.get("toolrl")(part="correct").score(traj, CTX) == -3.0


def test_task_without_truth_calls_scores_zero_correctness(make_traj):
    traj = make_traj("<think>hi</think>\n<response>hello</response>", {"response": "hello"})
    assert REWARDS.get("toolrl")(part="correct").score(traj, CTX) == 0.0


def test_ground_truth_arguments_may_be_a_json_string():
    truth = {"tool_calls": '[{"name": "f", "arguments": "{\\"x\\": 1}"}]'}
    assert ground_truth_calls(truth) == [call("f", x=1)]
