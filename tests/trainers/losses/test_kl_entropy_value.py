"""KL estimators, entropy and the clipped value loss against hand-computed values."""

import math

import pytest
import torch

from trainers.losses import clipped_value_loss, entropy_from_logits, kl_penalty
from trainers.metrics import keys

torch.set_num_threads(1)

LOGP = torch.tensor([0.0, -1.0])
REF = torch.tensor([-1.0, 0.0])  # d = ref - logp = (-1, 1)


@pytest.mark.parametrize(
    ("kind", "expected"),
    [
        ("k1", [1.0, -1.0]),  # logp - ref
        ("k2", [0.5, 0.5]),  # 0.5 * d^2
        ("k3", [math.exp(-1) + 1 - 1, math.e - 1 - 1]),  # exp(d) - d - 1 = (0.36788, 0.71828)
        ("none", [0.0, 0.0]),
    ],
)
def test_kl_estimators(kind, expected):
    torch.testing.assert_close(kl_penalty(LOGP, REF, kind), torch.tensor(expected))


def test_kl_unknown_kind():
    with pytest.raises(ValueError, match="k3"):
        kl_penalty(LOGP, REF, "k4")


def test_entropy_from_logits():
    # uniform over 2: ln 2; logits (0, ln 3) -> p = (1/4, 3/4): -(0.25 ln 0.25 + 0.75 ln 0.75) = 0.56233
    logits = torch.tensor([[[0.0, 0.0], [0.0, math.log(3)]]])
    expected = torch.tensor([[math.log(2), -(0.25 * math.log(0.25) + 0.75 * math.log(0.75))]])
    torch.testing.assert_close(entropy_from_logits(logits), expected)


def test_entropy_masked_tokens_are_zero():
    logits = torch.tensor([[[0.0, 0.0], [1e30, float("nan")]]])
    out = entropy_from_logits(logits, torch.tensor([[1.0, 0.0]]))
    torch.testing.assert_close(out, torch.tensor([[math.log(2), 0.0]]))


def test_clipped_value_loss():
    # token 0: V 1.0, old 0.5, R 2: unclipped (1-2)^2 = 1, clipped V 0.7 -> 1.69; 0.5 * max = 0.845
    # token 1: V 0.0, old 0.5, R 0: unclipped 0, clipped V 0.3 -> 0.09; 0.5 * max = 0.045
    # token 2: V 0.6, old 0.5, R 1: inside the clip, 0.5 * 0.16 = 0.08
    # token 3: masked. token_mean = (0.845 + 0.045 + 0.08) / 3 = 0.32333; clipped more on 2 of 3 tokens
    values = torch.tensor([[1.0, 0.0, 0.6, 7.0]])
    old = torch.tensor([[0.5, 0.5, 0.5, 0.0]])
    returns = torch.tensor([[2.0, 0.0, 1.0, -9.0]])
    out = clipped_value_loss(values, old, returns, torch.tensor([[1.0, 1.0, 1.0, 0.0]]), clip_range=0.2)
    assert float(out.loss) == pytest.approx(0.97 / 3)
    assert out.stats[keys.LOSS_VALUE_CLIPFRAC] == pytest.approx(2 / 3)


def test_unclipped_value_loss():
    # 0.5 * ((1-2)^2 + 0^2) / 2 = 0.25
    out = clipped_value_loss(
        torch.tensor([[1.0, 0.0]]),
        torch.zeros(1, 2),
        torch.tensor([[2.0, 0.0]]),
        torch.ones(1, 2),
        clip_range=None,
    )
    assert float(out.loss) == pytest.approx(0.25)
