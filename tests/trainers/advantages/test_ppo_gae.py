"""PPO's GAE over policy tokens, bridging tool/glue spans, against hand-computed values."""

import torch

from trainers.advantages import ESTIMATORS, AdvantageBatch
from trainers.advantages.tokens import token_level_rewards

torch.set_num_threads(1)

MASK = [[1.0, 1.0, 0.0, 1.0]]  # two policy tokens, one tool-output token, one policy token


def ppo_batch(values, **extra):
    return AdvantageBatch(
        ["g"], torch.tensor([1.0]), torch.tensor(MASK), values=torch.tensor([values]), **extra
    )


def test_gae_skips_the_tool_token():
    # Policy tokens (positions 0, 1, 3) are steps 0..2: V = (0.5, 0.4, 0.2), reward 1 on the last.
    # gamma 0.9, lambda 0.5:
    # t2: delta = 1 + 0 - 0.2 = 0.8                     A = 0.8
    # t1: delta = 0 + 0.9*0.2 - 0.4 = -0.22             A = -0.22 + 0.45*0.8 = 0.14
    # t0: delta = 0 + 0.9*0.4 - 0.5 = -0.14             A = -0.14 + 0.45*0.14 = -0.077
    # returns = A + V = (0.423, 0.54, 1.0)
    result = ESTIMATORS.get("ppo")(gamma=0.9, lam=0.5, whiten=False).compute(ppo_batch([0.5, 0.4, 9.0, 0.2]))
    torch.testing.assert_close(result.advantages, torch.tensor([[-0.077, 0.14, 0.0, 0.8]]))
    torch.testing.assert_close(result.returns, torch.tensor([[0.423, 0.54, 0.0, 1.0]]))


def test_value_on_a_masked_token_changes_nothing():
    ppo = ESTIMATORS.get("ppo")(gamma=0.9, lam=0.5, whiten=False)
    a = ppo.compute(ppo_batch([0.5, 0.4, 9.0, 0.2]))
    b = ppo.compute(ppo_batch([0.5, 0.4, -5.0, 0.2]))
    torch.testing.assert_close(a.advantages, b.advantages)
    torch.testing.assert_close(a.returns, b.returns)


def test_reward_on_trailing_glue_is_credited_to_last_action():
    # token reward 1 on a glue token (position 4) moves to the last policy token (position 3)
    mask = torch.tensor([[1.0, 1.0, 0.0, 1.0, 0.0]])
    batch = AdvantageBatch(["g"], torch.tensor([0.0]), mask, token_rewards=torch.tensor([[0, 0, 0, 0, 1.0]]))
    torch.testing.assert_close(token_level_rewards(batch, 0.0), torch.tensor([[0.0, 0, 0, 1.0, 0]]))


def test_kl_folded_into_token_rewards():
    # r_t = outcome on the last policy token - 0.1 * KL_t: (0 - 0.1*1, 0 - 0.1*2, masked, 1 - 0.1*0)
    batch = ppo_batch([0.0] * 4, kl=torch.tensor([[1.0, 2.0, 50.0, 0.0]]))
    torch.testing.assert_close(token_level_rewards(batch, 0.1), torch.tensor([[-0.1, -0.2, 0.0, 1.0]]))


def test_whitened_advantages_have_zero_mean_unit_std_on_policy_tokens():
    result = ESTIMATORS.get("ppo")(gamma=0.9, lam=0.5).compute(ppo_batch([0.5, 0.4, 9.0, 0.2]))
    policy = result.advantages[0, [0, 1, 3]]
    assert result.advantages[0, 2] == 0
    torch.testing.assert_close(policy.mean(), torch.tensor(0.0), atol=1e-6, rtol=0)
    torch.testing.assert_close(policy.std(correction=0), torch.tensor(1.0))


def test_rows_are_independent_and_carry_no_graph():
    # row 0 is the hand example above; row 1 has no policy token at all -> all zeros
    values = torch.tensor([[0.5, 0.4, 9.0, 0.2], [1.0, 1.0, 1.0, 1.0]], requires_grad=True)
    mask = torch.tensor([MASK[0], [0.0, 0.0, 0.0, 0.0]])
    batch = AdvantageBatch(["g", "h"], torch.tensor([1.0, 1.0]), mask, values=values)
    result = ESTIMATORS.get("ppo")(gamma=0.9, lam=0.5, whiten=False).compute(batch)
    torch.testing.assert_close(
        result.advantages, torch.tensor([[-0.077, 0.14, 0.0, 0.8], [0.0, 0.0, 0.0, 0.0]])
    )
    assert not result.advantages.requires_grad and not result.returns.requires_grad
