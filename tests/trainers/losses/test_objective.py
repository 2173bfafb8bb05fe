"""policy_objective = surrogate + beta * KL - entropy_coef * entropy, all with the same aggregation."""

import math

import pytest
import torch

from trainers.losses import PolicyLossConfig, policy_objective
from trainers.metrics import keys

torch.set_num_threads(1)


def test_objective_composes_hand_computed_terms():
    # one policy token: rho = 1, A = 1 -> surrogate -1
    # k3 with d = ref - logp = -1: e^-1 + 1 - 1 = 0.36788; beta 0.5 -> +0.18394
    # uniform logits over 2 -> entropy ln 2 = 0.69315; coef 0.1 -> -0.069315
    config = PolicyLossConfig(kl_kind="k3", kl_coef=0.5, entropy_coef=0.1)
    out = policy_objective(
        config,
        logp=torch.tensor([[0.0, 0.0]]),
        old_logp=torch.tensor([[0.0, 0.0]]),
        advantages=torch.tensor([[1.0, 0.0]]),
        mask=torch.tensor([[1.0, 0.0]]),
        ref_logp=torch.tensor([[-1.0, 0.0]]),
        logits=torch.zeros(1, 2, 2),
    )
    expected = -1 + 0.5 * math.exp(-1) - 0.1 * math.log(2)
    assert out.loss.item() == pytest.approx(expected)
    assert out.stats[keys.LOSS_KL] == pytest.approx(math.exp(-1))
    assert out.stats[keys.LOSS_ENTROPY] == pytest.approx(math.log(2))
    assert out.stats[keys.LOSS_TOTAL] == pytest.approx(expected)


def test_kl_term_without_reference_is_an_error():
    config = PolicyLossConfig(kl_kind="k3", kl_coef=0.1)
    with pytest.raises(ValueError, match="ref_logp"):
        policy_objective(
            config,
            logp=torch.zeros(1, 1),
            old_logp=torch.zeros(1, 1),
            advantages=torch.ones(1, 1),
            mask=torch.ones(1, 1),
        )


def test_per_token_entropy_can_replace_logits():
    # entropy 0.5 on the policy token, 99 on a masked one: bonus 0.1 * 0.5
    config = PolicyLossConfig(entropy_coef=0.1)
    zeros = torch.zeros(1, 2)
    out = policy_objective(
        config,
        logp=zeros,
        old_logp=zeros,
        advantages=torch.tensor([[1.0, 0.0]]),
        mask=torch.tensor([[1.0, 0.0]]),
        entropy=torch.tensor([[0.5, 99.0]]),
    )
    assert out.loss.item() == pytest.approx(-1 - 0.05)
    assert out.stats[keys.LOSS_ENTROPY] == pytest.approx(0.5)
