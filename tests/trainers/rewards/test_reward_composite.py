import math

import pytest
from pydantic import ValidationError

from trainers.rewards import RewardContext, RewardDefinition
from trainers.trajectory import ToolCall, ToolResult


def definition(*components):
    return RewardDefinition.model_validate({"components": list(components)})


def test_total_is_the_weighted_sum_and_every_component_is_recorded(make_traj):
    reward = definition(
        {"name": "correctness", "weight": 1.0},
        {"name": "overlong", "weight": 0.5, "params": {"max_length": 10, "cache_length": 4}},
    )
    traj = make_traj(final_answer="4", ground_truth={"answer": "4"}, policy_tokens=8)
    reward.compute([traj], RewardContext())
    # overlong at 8 tokens: (6 - 8) / 4 = -0.5
    assert traj.rewards == {"correctness": 1.0, "overlong": -0.5}
    assert traj.reward == pytest.approx(1.0 + 0.5 * -0.5)


def test_weights_follow_their_schedule_at_the_context_step(make_traj):
    reward = definition(
        {
            "name": "correctness",
            "weight": 2.0,
            "schedule": {"name": "linear", "start": 0.0, "end": 1.0, "steps": 10},
        }
    )
    traj = make_traj(final_answer="4", ground_truth={"answer": "4"})
    reward.compute([traj], RewardContext(step=5))
    assert traj.rewards["correctness"] == 1.0  # the raw value is recorded unweighted
    assert traj.reward == pytest.approx(1.0)
    assert reward.weights_at(10) == {"correctness": 2.0}


def test_labels_let_one_component_appear_twice(make_traj):
    reward = definition(
        {"name": "toolrl", "label": "toolrl_format", "params": {"part": "format"}},
        {"name": "toolrl", "label": "toolrl_correct", "params": {"part": "correct"}},
    )
    traj = make_traj("<think>a</think>", {"tool_calls": [{"name": "f", "arguments": {}}]})
    reward.compute([traj], RewardContext())
    assert traj.rewards == {"toolrl_format": 0.0, "toolrl_correct": -3.0}


def test_sub_scores_are_recorded_under_the_component_key(make_traj):
    reward = definition({"name": "artist", "label": "a"})
    text = "<think>t</think><python>1</python><output>1</output><answer>1</answer>"
    traj = make_traj(
        text, {"answer": "1"}, calls=[ToolCall("python", {})], results=[ToolResult("python", True, "1")]
    )
    reward.compute([traj], RewardContext())
    assert traj.rewards == {"a": 4.0, "a/answer": 1.0, "a/format": 1.0, "a/tool": 1.0}


def test_group_components_see_each_prompt_group_separately(make_traj):
    reward = definition({"name": "otc"})
    calc = ToolCall("calc", {})
    a1 = make_traj(final_answer="7", ground_truth={"answer": "7"}, calls=[calc], group_id="a")
    a2 = make_traj(final_answer="7", ground_truth={"answer": "7"}, calls=[calc, calc], group_id="a")
    b1 = make_traj(final_answer="7", ground_truth={"answer": "7"}, calls=[calc, calc], group_id="b")
    reward.compute([a1, b1, a2], RewardContext())
    # group a: n = 1, so two calls score sin(2pi/3); group b alone: n = 2 and it scores 1
    assert [a1.reward, a2.reward, b1.reward] == pytest.approx([1.0, math.sqrt(3) / 2, 1.0])


def test_compute_replaces_a_previous_total(make_traj):
    reward = definition({"name": "correctness"})
    traj = make_traj(final_answer="4", ground_truth={"answer": "4"})
    reward.compute([traj], RewardContext())
    reward.compute([traj], RewardContext())
    assert traj.reward == 1.0


def test_unknown_component_is_an_error_naming_it():
    with pytest.raises(ValidationError, match="unknown reward component 'nope'"):
        definition({"name": "nope"})


def test_bad_component_params_are_errors_naming_the_param():
    with pytest.raises(ValidationError, match="params.c"):
        definition({"name": "otc", "params": {"c": -1}})
    with pytest.raises(ValidationError, match="params.typo"):
        definition({"name": "otc", "params": {"typo": 1}})


def test_duplicate_keys_are_an_error():
    with pytest.raises(ValidationError, match="duplicate"):
        definition({"name": "correctness"}, {"name": "correctness"})


def test_definition_round_trips_through_json():
    reward = definition({"name": "toolrl", "schedule": {"name": "toolrl_dynamic", "part": "format"}})
    again = RewardDefinition.model_validate_json(reward.model_dump_json())
    assert again.model_dump() == reward.model_dump()
