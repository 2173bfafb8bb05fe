"""One sampling step: temperature, top-k and top-p, returning the logprob of each sampled token and
the entropy of the distribution it was drawn from.

The logprob is the log-softmax of the processed distribution actually sampled from (logits / T, then
top-k and top-p masking). With T = 1, top_k = 0 and top_p = 1 that is the model's own log-softmax, so
a plain forward pass reproduces it. Greedy decoding (T = 0) reports the unprocessed log-softmax. The
entropy (nats) is that same processed distribution's, masked tokens contributing nothing.

Sampling is Gumbel-max with counter-based noise: the noise of a row depends only on its own seed,
its step and the token id (a splitmix64 hash), so a seeded request samples the same tokens whatever
else shares its batch. That keeps overlapped rollouts, whose batches form by timing, reproducible.
"""

from __future__ import annotations

from typing import NamedTuple

import torch

from trainers.config.sampling import SamplingParams


def processed_logprobs(logits: torch.Tensor, params: SamplingParams) -> torch.Tensor:
    """Log-probabilities of the distribution to sample from, shape [batch, vocab], float32."""
    logits = logits.float()
    if params.temperature > 0 and params.temperature != 1.0:
        logits = logits / params.temperature
    if params.top_k > 0 and params.top_k < logits.shape[-1]:
        kth = torch.topk(logits, params.top_k, dim=-1).values[:, -1:]
        logits = logits.masked_fill(logits < kth, float("-inf"))
    if params.top_p < 1.0:
        sorted_logits, order = torch.sort(logits, dim=-1, descending=True)
        probs = torch.softmax(sorted_logits, dim=-1)
        # drop a token when the mass before it already reaches top_p (the top token always stays)
        drop = (torch.cumsum(probs, dim=-1) - probs) >= params.top_p
        sorted_logits = sorted_logits.masked_fill(drop, float("-inf"))
        logits = torch.empty_like(logits).scatter_(-1, order, sorted_logits)
    return torch.log_softmax(logits, dim=-1)


class Sampled(NamedTuple):
    """One step's draw, each [batch]: the token ids, their logprobs and the entropy they came from."""

    tokens: torch.Tensor
    logprobs: torch.Tensor
    entropies: torch.Tensor


def sample_step(logits: torch.Tensor, params: SamplingParams, seeds: torch.Tensor, step: int) -> Sampled:
    """Sample one token per row; `seeds` [batch] int64, one per row."""
    logprobs = processed_logprobs(logits, params)
    if params.temperature == 0:
        tokens = torch.argmax(logprobs, dim=-1)
    else:
        tokens = torch.argmax(logprobs + gumbel_noise(seeds, step, logprobs.shape[-1]), dim=-1)
    # entr(p) = -p log p, 0 at p = 0: a masked token's -inf logprob adds nothing instead of nan
    entropies = torch.special.entr(logprobs.exp()).sum(-1)
    return Sampled(tokens, logprobs.gather(-1, tokens.unsqueeze(-1)).squeeze(-1), entropies)


_M1, _M2 = -4658895280553007687, -7723592293110705685  # splitmix64 multipliers as signed int64
_GOLDEN = -7046029254386353131  # 0x9E3779B97F4A7C15


def _mix(x: torch.Tensor) -> torch.Tensor:
    """splitmix64's finaliser on int64 (right shifts masked to be logical; products wrap)."""
    x = (x ^ ((x >> 30) & ((1 << 34) - 1))) * _M1
    x = (x ^ ((x >> 27) & ((1 << 37) - 1))) * _M2
    return x ^ ((x >> 31) & ((1 << 33) - 1))


def gumbel_noise(seeds: torch.Tensor, step: int, vocab: int) -> torch.Tensor:
    """Gumbel(0, 1) noise [batch, vocab], a pure function of (seed, step, token id).

    The uniforms have 24 bits, computed in float32 (half the time of float64 on the sampling path);
    that truncates the Gumbel's lower tail at -2.85, below which it falls with probability 3e-8, and
    its upper tail at 16.6 (probability 6e-8). See `uniform_from_bits` for why the top draw is clamped.
    """
    offset = (step * _GOLDEN + 2**63) % 2**64 - 2**63  # the int64 product, wrapped as a tensor would
    row = _mix(_mix(seeds) + offset)
    ids = torch.arange(vocab, device=seeds.device, dtype=torch.int64)
    bits = (_mix(row.unsqueeze(-1) + ids * _GOLDEN) >> 40) & ((1 << 24) - 1)
    return -torch.log(-torch.log(uniform_from_bits(bits)))


_BELOW_ONE = 1.0 - 2.0**-24  # nextafter(1, 0) in float32


def uniform_from_bits(bits: torch.Tensor) -> torch.Tensor:
    """(k + 0.5) / 2**24 in float32 for 24-bit draws k, strictly inside (0, 1).

    float32 has 24 significant bits, so from 2**23 up k + 0.5 is a tie that rounds to the even
    neighbour, and the largest draw, (2**24 - 1) + 0.5, rounds to 2**24: its uniform was 1.0 and its
    noise +inf, so that token won whatever its logit, a top-k / top-p masked one included (-inf + inf
    is nan, which argmax picks, with logprob -inf). The clamp maps that one draw to the largest
    float32 below 1, 1 - 2**-24, the left edge of its cell [1 - 2**-24, 1); every other draw keeps its
    value bit for bit, so seeded sampling only changes where the noise was infinite. It costs one
    float32 pass, well under 1% of the noise's time (the hash and the two logs dominate). Dropping to
    23 bits, (k + 0.5) / 2**23, would need no clamp but moves every uniform by 2**-25; near 1, where
    -log(u) ~ 1 - u, that moves the noise by up to 0.7, so some seeded samples would change with no
    bug behind them.
    """
    uniform = (bits.to(torch.float32) + 0.5) * (1.0 / (1 << 24))
    return uniform.clamp_(max=_BELOW_ONE)
