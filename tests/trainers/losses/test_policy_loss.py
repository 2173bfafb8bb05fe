"""Clipped surrogate with clip-higher and dual clip, against hand-computed values."""

import math

import pytest
import torch

from trainers.losses import clipped_surrogate
from trainers.metrics import keys

torch.set_num_threads(1)

# token:        0 (A>0, high clip)  1 (A<0, low clip)  2 (A>0, inside)  3 (A>0, low ratio)  4 (masked)
RATIOS = [1.5, 0.5, 1.1, 0.5, 0.9]
ADVANTAGES = [1.0, -1.0, 2.0, 1.0, -1.0]
MASK = [1.0, 1.0, 1.0, 1.0, 0.0]


def run(ratios=RATIOS, advantages=ADVANTAGES, mask=MASK, **kwargs):
    logp = torch.tensor([ratios]).log().requires_grad_()
    out = clipped_surrogate(
        logp, torch.zeros(1, len(ratios)), torch.tensor([advantages]), torch.tensor([mask]), **kwargs
    )
    out.loss.backward()
    return out, logp.grad


def test_clip_higher_values_and_fractions():
    # per token -min(rho A, clip(rho, 0.8, 1.28) A):
    # 0: -min(1.5, 1.28) = -1.28     1: -min(-0.5, -0.8) = 0.8
    # 2: -min(2.2, 2.2) = -2.2       3: -min(0.5, 0.8) = -0.5
    # token_mean over 4 policy tokens: (-1.28 + 0.8 - 2.2 - 0.5) / 4 = -0.795
    out, _ = run(eps_low=0.2, eps_high=0.28)
    assert out.loss.item() == pytest.approx(-0.795)
    assert out.stats[keys.LOSS_CLIPFRAC_HIGH] == pytest.approx(0.25)  # token 0
    assert out.stats[keys.LOSS_CLIPFRAC_LOW] == pytest.approx(0.25)  # token 1


def test_clipped_tokens_get_no_gradient():
    # d/dlogp of -A * exp(logp) = -A * rho, divided by 4 tokens: token 2 -> -2.2 / 4, token 3 -> -0.5 / 4
    _, grad = run(eps_low=0.2, eps_high=0.28)
    torch.testing.assert_close(grad, torch.tensor([[0.0, 0.0, -0.55, -0.125, 0.0]]))


def test_eps_high_moves_the_upper_clip():
    # with eps_high 0.6 token 0 is no longer clipped: -1.5 instead of -1.28 -> (-1.5 + 0.8 - 2.2 - 0.5) / 4
    out, _ = run(eps_low=0.2, eps_high=0.6)
    assert out.loss.item() == pytest.approx(-0.85)
    assert out.stats[keys.LOSS_CLIPFRAC_HIGH] == 0.0


def test_approx_kl_is_k3_of_the_ratio():
    # mean of (rho - 1) - log rho over tokens 0..3
    expected = sum((r - 1) - math.log(r) for r in RATIOS[:4]) / 4  # 0.12138
    out, _ = run()
    assert out.stats[keys.LOSS_APPROX_KL] == pytest.approx(expected, rel=1e-5)


def test_dual_clip_bounds_negative_advantage_loss():
    # rho 5, A -1: standard -min(-5, -1.2) = 5; dual clip c=3 caps it at -c A = 3, gradient 0
    single = {"ratios": [5.0], "advantages": [-1.0], "mask": [1.0]}
    plain, _ = run(**single)
    dual, grad = run(**single, dual_clip=3.0)
    assert plain.loss.item() == pytest.approx(5.0)
    assert dual.loss.item() == pytest.approx(3.0)
    assert dual.stats[keys.LOSS_CLIPFRAC_DUAL] == 1.0
    assert float(grad) == 0.0


def test_dual_clip_leaves_positive_advantages_alone():
    out, _ = run(dual_clip=3.0, eps_high=0.28)
    assert out.loss.item() == pytest.approx(-0.795)


def test_dual_clip_must_exceed_one():
    with pytest.raises(ValueError, match="dual_clip"):
        run(dual_clip=0.5)
