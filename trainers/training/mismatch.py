"""Train-inference mismatch: the sampler's log-probs of the sampled tokens against the trainer's.

A vLLM engine samples with its own kernels (and often another dtype) than the trainer's forward pass,
so the same token under the same weights gets a different log-prob; the gap makes "on-policy" data
off-policy (Yao et al. 2025). The loop reports it every step and can use the sampler's log-probs as the
old policy or correct towards the trainer's with truncated importance sampling (`PolicyLossConfig.tis_cap`).
"""

from __future__ import annotations

from collections.abc import Sequence

import torch

from trainers.metrics import keys
from trainers.trajectory import Trajectory


def sampler_logprobs(trajectories: Sequence[Trajectory], width: int) -> torch.Tensor | None:
    """[B, width] the log-prob each sampled token had when it was sampled, aligned with the response
    columns of `collate` (0 elsewhere); None when some assistant turn came without log-probs."""
    if any(turn.logprobs is None for t in trajectories for turn in t.assistant_turns):
        return None
    out = torch.zeros((len(trajectories), width), dtype=torch.float32)
    for i, t in enumerate(trajectories):
        row = t.response_logprobs[:width]
        if row:
            out[i, : len(row)] = torch.tensor(row, dtype=torch.float32)
    return out


def mismatch_metrics(trainer: torch.Tensor, sampler: torch.Tensor, mask: torch.Tensor) -> dict[str, float]:
    """Mean and max |sampler - trainer| log-prob over the policy tokens of `mask` ([B, T] each)."""
    keep = mask.to(trainer.device) > 0
    if not bool(keep.any()):
        return {}
    gap = (sampler.to(trainer.device, trainer.dtype) - trainer).abs()[keep]
    return {keys.LOGPROB_MISMATCH_MEAN: float(gap.mean()), keys.LOGPROB_MISMATCH_MAX: float(gap.max())}
