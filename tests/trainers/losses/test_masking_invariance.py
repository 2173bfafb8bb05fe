"""Masked tokens (tool output, glue, padding) never change any loss, statistic or gradient."""

import pytest
import torch

from trainers.losses import PolicyLossConfig, clipped_value_loss, policy_objective
from trainers.losses.aggregate import AGGREGATIONS

torch.set_num_threads(1)

B, T, V = 3, 6, 5
MASK = torch.tensor([[1, 1, 0, 0, 1, 0], [0, 1, 1, 1, 0, 0], [1, 0, 1, 0, 1, 1]], dtype=torch.float32)


def inputs(seed, masked_fill=None):
    g = torch.Generator().manual_seed(seed)
    tensors = {
        "logits": torch.randn(B, T, V, generator=g),
        "logp": -torch.rand(B, T, generator=g),
        "old_logp": -torch.rand(B, T, generator=g),
        "ref_logp": -torch.rand(B, T, generator=g),
        "advantages": torch.randn(B, T, generator=g),
    }
    if masked_fill is not None:  # scramble every masked position with wild values
        g2 = torch.Generator().manual_seed(masked_fill)
        for name, t in tensors.items():
            noise = 1e4 * torch.randn(t.shape, generator=g2)
            off = (MASK == 0) if t.dim() == 2 else (MASK == 0)[..., None].expand_as(t)
            tensors[name] = torch.where(off, noise, t)
    return {k: v.clone().requires_grad_(k in ("logits", "logp")) for k, v in tensors.items()}


def objective(config, tensors):
    out = policy_objective(config, mask=MASK, **tensors)
    out.loss.backward()
    return out, tensors["logp"].grad, tensors["logits"].grad


@pytest.mark.parametrize("agg", AGGREGATIONS)
@pytest.mark.parametrize("kl_kind", ["k1", "k2", "k3"])
def test_policy_objective_ignores_masked_positions(agg, kl_kind):
    config = PolicyLossConfig(
        eps_high=0.28, dual_clip=3.0, agg=agg, kl_kind=kl_kind, kl_coef=0.1, entropy_coef=0.01
    )
    clean, clean_dlogp, clean_dlogits = objective(config, inputs(0))
    noisy, noisy_dlogp, noisy_dlogits = objective(config, inputs(0, masked_fill=1))
    torch.testing.assert_close(clean.loss, noisy.loss)
    assert clean.stats == pytest.approx(noisy.stats)
    torch.testing.assert_close(clean_dlogp, noisy_dlogp)
    torch.testing.assert_close(clean_dlogits, noisy_dlogits)
    assert clean_dlogp[MASK == 0].abs().sum() == 0
    assert clean_dlogits[MASK == 0].abs().sum() == 0


def test_value_loss_ignores_masked_positions():
    g = torch.Generator().manual_seed(3)
    values, old, returns = (torch.randn(B, T, generator=g) for _ in range(3))
    scrambled = torch.where(MASK == 0, torch.full((B, T), 1e6), values).requires_grad_()
    values.requires_grad_()
    a = clipped_value_loss(values, old, returns, MASK)
    b = clipped_value_loss(scrambled, old, returns, MASK)
    a.loss.backward()
    b.loss.backward()
    torch.testing.assert_close(a.loss, b.loss)
    torch.testing.assert_close(values.grad, scrambled.grad)
