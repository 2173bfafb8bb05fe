import math

import pytest

from trainers.rewards import REWARDS, RewardContext
from trainers.rewards.otc import executed_calls, grpo_tool_reward, mapping, ppo_tool_reward
from trainers.trajectory import ToolCall, ToolResult

CTX = RewardContext()


def test_ppo_curve_at_chosen_m():
    assert ppo_tool_reward(0, c=1.0) == 1.0
    assert ppo_tool_reward(1, c=1.0) == pytest.approx(0.5)  # cos(pi / 3)
    assert ppo_tool_reward(2, c=1.0) == pytest.approx(math.cos(2 * math.pi / 5))


def test_mapping_cases():
    assert mapping(0, 0) == 0.0
    assert mapping(3, 0) == 3.0
    assert mapping(2, 2) == 2.0
    assert mapping(4, 2) == pytest.approx(16 / 6)


def test_grpo_curve_peaks_at_the_group_optimum():
    # n = 2: f(1,2) = 4/3 -> sin(pi/3); f(2,2) = 2 -> sin(pi/2);
    # f(4,2) = 8/3 -> sin(2pi/3); f(6,2) = 3 -> sin(3pi/4)
    assert grpo_tool_reward(0, 2, c=1.0) == pytest.approx(0.0)
    assert grpo_tool_reward(1, 2, c=1.0) == pytest.approx(math.sqrt(3) / 2)
    assert grpo_tool_reward(2, 2, c=1.0) == pytest.approx(1.0)
    assert grpo_tool_reward(4, 2, c=1.0) == pytest.approx(math.sqrt(3) / 2)
    assert grpo_tool_reward(6, 2, c=1.0) == pytest.approx(math.sqrt(2) / 2)


def test_grpo_with_optimum_zero_calls_uses_the_cosine():
    assert grpo_tool_reward(0, 0, c=1.0) == 1.0
    assert grpo_tool_reward(1, 0, c=1.0) == pytest.approx(0.5)


def with_calls(make_traj, m, answer):
    return make_traj(final_answer=answer, ground_truth={"answer": "7"}, calls=[ToolCall("calc", {})] * m)


def test_group_score_uses_the_fewest_calls_among_correct_answers(make_traj):
    group = [with_calls(make_traj, m, a) for m, a in [(1, "7"), (2, "7"), (3, "7"), (0, "8")]]
    scores = REWARDS.get("otc")().score_group(group, CTX)
    # n = 1 (the wrong answer's 0 calls do not count): f(2,1) = 4/3 -> sin(2pi/3); f(3,1) = 3/2 -> sin(3pi/4)
    assert scores == pytest.approx([1.0, math.sqrt(3) / 2, math.sqrt(2) / 2, 0.0])


def test_ppo_variant_and_alpha_scale_each_trajectory_alone(make_traj):
    otc = REWARDS.get("otc")(variant="ppo", alpha=2.0)
    assert otc.score(with_calls(make_traj, 1, "7"), CTX) == pytest.approx(1.0)
    assert otc.score(with_calls(make_traj, 1, "9"), CTX) == 0.0


RAN = ToolResult("calc", True, "7")
RAN_AND_FAILED = ToolResult("calc", False, "ValueError", "ValueError")
PAST_LIMIT = ToolResult("calc", False, "", "tool call limit reached", executed=False)
MALFORMED = ToolResult("calc", False, "malformed tool call: bad JSON", "malformed", executed=False)
BAD_CALL = ToolCall("calc", {}, parse_error="bad JSON")


def correct_with(make_traj, calls, results):
    return make_traj(final_answer="7", ground_truth={"answer": "7"}, calls=calls, results=results)


def test_calls_past_the_limit_do_not_count_but_failed_runs_do(make_traj):
    traj = correct_with(make_traj, [ToolCall("calc", {})] * 3, [RAN, RAN_AND_FAILED, PAST_LIMIT])
    assert executed_calls(traj) == 2
    # m = 2, c = 2: cos(2 * pi / (2 * 2 + 2)) = cos(pi / 3) = 0.5 (all three: cos(3pi/8) = 0.383)
    assert REWARDS.get("otc")(variant="ppo", c=2.0).score(traj, CTX) == pytest.approx(0.5)


def test_malformed_calls_do_not_count(make_traj):
    traj = correct_with(make_traj, [BAD_CALL, ToolCall("calc", {})], [MALFORMED, RAN])
    assert executed_calls(traj) == 1
    # m = 1, c = 1: cos(1 * pi / (2 * 1 + 1)) = cos(pi / 3) = 0.5 (both: cos(2pi/5) = 0.309)
    assert REWARDS.get("otc")(variant="ppo").score(traj, CTX) == pytest.approx(0.5)


def test_a_malformed_call_does_not_stand_in_for_a_real_one(make_traj):
    real = correct_with(make_traj, [ToolCall("calc", {})], [RAN])
    junk = correct_with(make_traj, [BAD_CALL], [MALFORMED])
    scores = REWARDS.get("otc")().score_group([real, junk], CTX)
    # m = 1 and 0, both correct, so n = 0: the real call scores cos(pi / 3) = 0.5, the junk one
    # (no call ran) f(0, 0) = 0 -> 1. Counting the junk call would give n = 1 and both sin(pi / 2) = 1.
    assert scores == pytest.approx([0.5, 1.0])
