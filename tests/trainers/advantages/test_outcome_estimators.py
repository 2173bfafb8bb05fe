"""GRPO, Dr.GRPO, RLOO and ReMax against hand-computed values."""

import pytest
import torch

from trainers.advantages import ESTIMATORS, AdvantageBatch

torch.set_num_threads(1)


def batch(rewards, group_ids, mask=None, **extra):
    mask = mask if mask is not None else [[1, 1, 0]] * len(rewards)
    return AdvantageBatch(group_ids, torch.tensor(rewards), torch.tensor(mask), **extra)


def scalars(result):
    return result.advantages[:, 0]  # column 0 is a policy token in every test batch


def test_registry_has_every_estimator():
    assert ESTIMATORS.names() == ["dr_grpo", "gigpo", "grpo", "ppo", "reinforce_pp", "remax", "rloo"]


def test_grpo_divides_by_sample_std():
    # r = [1, 2, 6]: mean 3, deviations (-2, -1, 3), sample var (4+1+9)/2 = 7, std 2.6458
    result = ESTIMATORS.get("grpo")(eps=0.0).compute(batch([1.0, 2.0, 6.0], ["g"] * 3))
    expected = torch.tensor([-2 / 7**0.5, -1 / 7**0.5, 3 / 7**0.5])  # -0.7559, -0.3780, 1.1339
    torch.testing.assert_close(scalars(result), expected)


def test_grpo_population_std_option():
    # r = [1, 0]: mean 0.5, population std 0.5 -> (+1, -1)
    result = ESTIMATORS.get("grpo")(eps=0.0, unbiased_std=False).compute(batch([1.0, 0.0], ["g"] * 2))
    torch.testing.assert_close(scalars(result), torch.tensor([1.0, -1.0]))


def test_grpo_normalises_each_group_separately_and_zero_variance_is_zero():
    # group a: [1, 0] -> sample std 0.7071 -> +-0.7071; group b: [5, 5] -> 0 / (0 + eps) = 0
    result = ESTIMATORS.get("grpo")().compute(batch([1.0, 5.0, 0.0, 5.0], ["a", "b", "a", "b"]))
    torch.testing.assert_close(scalars(result), torch.tensor([0.7071, 0.0, -0.7071, 0.0]), atol=1e-4, rtol=0)


def test_outcome_advantage_on_policy_tokens_only():
    # mask [1, 0, 1, 0]: the scalar lands on positions 0 and 2; tool/glue/padding stay 0
    result = ESTIMATORS.get("dr_grpo")().compute(batch([1.0, 3.0], ["g", "g"], mask=[[1, 0, 1, 0]] * 2))
    torch.testing.assert_close(result.advantages, torch.tensor([[-1.0, 0, -1.0, 0], [1.0, 0, 1.0, 0]]))


def test_dr_grpo_only_centres():
    # r = [1, 2, 6], mean 3 -> (-2, -1, 3)
    result = ESTIMATORS.get("dr_grpo")().compute(batch([1.0, 2.0, 6.0], ["g"] * 3))
    torch.testing.assert_close(scalars(result), torch.tensor([-2.0, -1.0, 3.0]))


def test_rloo_leave_one_out():
    # 1 - (2+6)/2 = -3; 2 - (1+6)/2 = -1.5; 6 - (1+2)/2 = 4.5; a lone sample has no baseline -> 0
    result = ESTIMATORS.get("rloo")().compute(batch([1.0, 2.0, 6.0, 9.0], ["g", "g", "g", "solo"]))
    torch.testing.assert_close(scalars(result), torch.tensor([-3.0, -1.5, 4.5, 0.0]))


def test_remax_subtracts_greedy_reward_of_the_group():
    # group a greedy 0.5: (1 - 0.5, 0 - 0.5); group b greedy 1: (1 - 1)
    extra = {"baseline_rewards": {"a": 0.5, "b": 1.0}}
    result = ESTIMATORS.get("remax")().compute(batch([1.0, 0.0, 1.0], ["a", "a", "b"], **extra))
    torch.testing.assert_close(scalars(result), torch.tensor([0.5, -0.5, 0.0]))


def test_remax_without_baseline_names_the_group():
    with pytest.raises(ValueError, match="'b'"):
        ESTIMATORS.get("remax")().compute(batch([1.0, 0.0], ["a", "b"], baseline_rewards={"a": 0.0}))


def test_flags_tell_the_loop_what_to_provide():
    assert ESTIMATORS.get("ppo").needs_values and not ESTIMATORS.get("grpo").needs_values
    assert ESTIMATORS.get("remax").needs_greedy_baseline
    assert ESTIMATORS.get("reinforce_pp")(kl_coef=0.1).needs_kl
    assert not ESTIMATORS.get("grpo")().needs_kl
