"""Gumbel noise stays finite: the uniforms are strictly inside (0, 1), so a masked token is never sampled."""

from __future__ import annotations

import math

import pytest
import torch

from trainers.backends.sampler import _GOLDEN, _mix, gumbel_noise, sample_step, uniform_from_bits
from trainers.config.sampling import SamplingParams

# Seeds whose hash (step 0) has its top 24 bits all ones at one token, found by a search over seeds:
# the old 24-bit uniform (2**24 - 1 + 0.5) / 2**24 rounded to 1.0 there and the noise was +inf.
SEED_AT_53, SEED_AT_7 = 1032660, 6991485


def top24(seed: int, token: int) -> int:
    """The hash's top 24 bits for (seed, step 0, token), as gumbel_noise computes them."""
    row = _mix(_mix(torch.tensor([seed])))
    product = torch.tensor([token]) * _GOLDEN  # wraps in int64, as gumbel_noise's does
    return int(((_mix(row + product) >> 40) & ((1 << 24) - 1)).item())


def test_largest_draw_is_below_one_and_its_noise_finite():
    # the bug: float32 has 24 significant bits, so 2**24 - 1 + 0.5 ties and rounds to the even 2**24
    assert torch.tensor(2**24 - 1, dtype=torch.float32) + 0.5 == 2**24
    low, top, below = uniform_from_bits(torch.tensor([0, 2**24 - 1, 2**24 - 2])).tolist()
    # (0 + 0.5) / 2**24 = 2**-25, exact; the top draw is clamped to 1 - 2**-24, the largest float32 < 1;
    # the next, (2**24 - 2 + 0.5) / 2**24, ties and rounds to even (2**24 - 2) / 2**24 = 1 - 2**-23
    assert low == 2.0**-25 and top == 1.0 - 2.0**-24 and below == 1.0 - 2.0**-23
    assert top < 1.0
    noise = -torch.log(-torch.log(torch.tensor([low, top])))
    # -log(-log(2**-25)) = -log(25 ln 2) = -log(17.3287) = -2.8524
    # -log(-log(1 - 2**-24)) ~ -log(2**-24) = 24 ln 2 = 16.6355
    assert torch.isfinite(noise).all()
    assert noise.tolist() == pytest.approx([-2.8524, 16.6355], rel=1e-4)


def test_the_draw_that_was_infinite_is_finite_now():
    assert top24(SEED_AT_53, 53) == 2**24 - 1  # the old code's uniform was 1.0 here
    noise = gumbel_noise(torch.tensor([SEED_AT_53]), 0, 64)
    assert torch.isfinite(noise).all()
    assert noise[0, 53].item() == pytest.approx(16.6355, rel=1e-4)  # the top cell: 1 - 2**-24, as above


def test_a_far_lower_logit_never_wins_on_that_draw():
    logits = torch.full((1, 64), -50.0)
    logits[0, 0] = 50.0
    # log-softmax: token 0 ~ 0, token 53 ~ -100; noise is within [-2.85, 16.64], so token 0 wins
    # (with the old +inf noise at token 53, token 53 won)
    tokens, logprobs, _ = sample_step(logits, SamplingParams(), torch.tensor([SEED_AT_53]), step=0)
    assert tokens.tolist() == [0] and logprobs.item() > -1e-6


def test_a_top_k_excluded_token_is_not_sampled_on_that_draw():
    logits = torch.zeros(1, 64)
    logits[0, 53] = -1.0  # the lowest, so top_k = 63 masks it to -inf
    tokens, logprobs, _ = sample_step(logits, SamplingParams(top_k=63), torch.tensor([SEED_AT_53]), step=0)
    # 63 equal tokens remain: logprob -log(63)
    assert tokens.item() != 53 and logprobs.item() == pytest.approx(-math.log(63), rel=1e-5)


def test_a_million_draws_follow_the_masked_distribution_and_skip_excluded_tokens():
    torch.set_num_threads(1)
    weights = [0.30, 0.25, 0.15, 0.10, 0.08, 0.06, 0.04, 0.02]
    params = SamplingParams(top_k=7, top_p=0.85)
    # top_k = 7 drops token 7 (0.02); the other seven renormalise by 0.98, and the mass before each
    # (in order) is 0, .30, .55, .70, .80, .88, .94 over .98 = 0, .306, .561, .714, .816, .898, .959;
    # top_p = 0.85 drops a token whose mass before is >= .85: tokens 5 and 6. Kept: 0-4, sum .88, so
    # p = [.30, .25, .15, .10, .08] / .88 = [.3409, .2841, .1705, .1136, .0909].
    kept = [w / 0.88 for w in weights[:5]]
    n, chunk = 1_000_000, 250_000
    first = SEED_AT_7 - 500_000  # the range holds the seed whose old noise at token 7 was +inf
    assert top24(SEED_AT_7, 7) == 2**24 - 1
    logits = torch.tensor(weights).log().expand(chunk, -1)
    counts = torch.zeros(8, dtype=torch.int64)
    for start in range(first, first + n, chunk):
        tokens, logprobs, _ = sample_step(logits, params, torch.arange(start, start + chunk), step=0)
        counts += torch.bincount(tokens, minlength=8)
        expected_lp = torch.tensor(kept).log()[tokens.clamp(max=4)]  # an excluded token's -inf fails
        assert torch.allclose(logprobs, expected_lp, atol=1e-5)
    assert counts[5:].tolist() == [0, 0, 0]  # never an excluded token
    expected = [n * p for p in kept]
    chi2 = sum((int(o) - e) ** 2 / e for o, e in zip(counts[:5], expected, strict=True))
    # 5 categories, 4 degrees of freedom: P(X > x) = exp(-x/2) (1 + x/2) (chi-square, even df).
    # At x = 33.38: exp(-16.69) * 17.69 = 5.64e-8 * 17.69 = 1.0e-6, the significance level: a correct
    # sampler exceeds it on one seed range in a million (and the seeds here are fixed).
    critical = 33.38
    assert chi2 < critical, (chi2, counts.tolist())
