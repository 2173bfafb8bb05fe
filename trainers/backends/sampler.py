"""One sampling step: temperature, top-k and top-p, returning the logprob of each sampled token.

The logprob is the log-softmax of the processed distribution actually sampled from (logits / T, then
top-k and top-p masking). With T = 1, top_k = 0 and top_p = 1 that is the model's own log-softmax, so
a plain forward pass reproduces it. Greedy decoding (T = 0) reports the unprocessed log-softmax.
"""

from __future__ import annotations

import torch

from trainers.backends.sampling import SamplingParams


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


def sample_step(
    logits: torch.Tensor, params: SamplingParams, generator: torch.Generator | None
) -> tuple[torch.Tensor, torch.Tensor]:
    """Sampled token ids [batch] and their logprobs [batch]."""
    logprobs = processed_logprobs(logits, params)
    if params.temperature == 0:
        tokens = torch.argmax(logprobs, dim=-1)
    else:
        tokens = torch.multinomial(logprobs.exp(), 1, generator=generator).squeeze(-1)
    return tokens, logprobs.gather(-1, tokens.unsqueeze(-1)).squeeze(-1)
