import pytest

from trainers.rewards import REWARDS, RewardContext
from trainers.rewards.tags import exact_blocks, tags_in_order
from trainers.trajectory import Turn

CTX = RewardContext()


def test_tags_in_order():
    assert tags_in_order("<think>a</think> b <answer>c</answer>", ["think", "answer"])
    assert not tags_in_order("<answer>c</answer><think>a</think>", ["think", "answer"])
    assert not tags_in_order("<think>a <answer>c</answer>", ["think", "answer"])


def test_exact_blocks_allow_runs_of_repeatable_tags_only():
    two_calls = "<think>a</think>\n<tool_call>1</tool_call>\n<tool_call>2</tool_call>"
    assert exact_blocks(two_calls, ["think", "tool_call"], repeatable=["tool_call"])
    assert not exact_blocks(two_calls, ["think", "tool_call"])
    assert not exact_blocks("<think>a</think><think>b</think>", ["think"])


def test_own_tag_rule_scores_each_assistant_turn(make_traj):
    fmt = REWARDS.get("format")(tags=["think", "answer"], scope="each_turn")
    good = Turn(role="assistant", text="<think>a</think><answer>1</answer>", token_ids=[1], loss_mask=[1])
    bad = Turn(role="assistant", text="<answer>1</answer>", token_ids=[1], loss_mask=[1])
    assert fmt.score(make_traj(turns=[good, good]), CTX) == 1.0
    assert fmt.score(make_traj(turns=[good, bad]), CTX) == 0.0
    whole = REWARDS.get("format")(tags=["think", "answer"], scope="response")
    assert fmt.score(make_traj(turns=[bad, good]), CTX) == 0.0
    assert whole.score(make_traj(turns=[bad, good]), CTX) == 1.0  # the joined text has think, then answer


def test_no_assistant_turn_is_bad_format(make_traj):
    assert REWARDS.get("format")(tags=["think"], bad=-1.0).score(make_traj(turns=[]), CTX) == -1.0


def test_template_rule_needs_a_template(make_traj):
    with pytest.raises(ValueError, match="template"):
        REWARDS.get("format")().score(make_traj("<think>a</think>"), CTX)


def test_template_rule_uses_the_templates_format_check(make_traj):
    good = "<think>a</think> \\boxed{1}"
    bad = "\\boxed{1} <think>a</think>"
    assert REWARDS.get("format")().score(make_traj(good), RewardContext(template="qwen_tool")) == 1.0
    assert REWARDS.get("format")().score(make_traj(bad), RewardContext(template="qwen_tool")) == 0.0


def test_exact_blocks_ignore_a_sampled_end_of_turn_token():
    assert exact_blocks("<think>a</think><tool_call>1</tool_call><|im_end|>", ["think", "tool_call"])
    assert exact_blocks("<think>a</think></s>", ["think"])
