"""Per-token KL(pi_theta || pi_ref) estimators (Schulman, "Approximating KL divergence", 2020).

With r = pi_ref / pi_theta on the sampled token: k1 = -log r, k2 = (log r)^2 / 2,
k3 = (r - 1) - log r, the low-variance unbiased form GRPO uses (arXiv 2402.03300 eq. 4).
"""

from __future__ import annotations

from typing import Literal

import torch

KLKind = Literal["k1", "k2", "k3", "none"]
KL_KINDS: tuple[str, ...] = ("k1", "k2", "k3", "none")
MAX_LOG_RATIO = 20.0  # keeps exp() finite for k3 on tokens the reference finds very unlikely


def kl_penalty(
    logp: torch.Tensor, ref_logp: torch.Tensor, kind: KLKind, mask: torch.Tensor | None = None
) -> torch.Tensor:
    """Per-token KL estimate; zero (with zero gradient) where mask == 0."""
    diff = ref_logp - logp
    if mask is not None:
        diff = torch.where(mask > 0, diff, 0.0)
    diff = diff.clamp(-MAX_LOG_RATIO, MAX_LOG_RATIO)
    if kind == "k1":
        return -diff
    if kind == "k2":
        return 0.5 * diff.square()
    if kind == "k3":
        return torch.exp(diff) - diff - 1.0
    if kind == "none":
        return torch.zeros_like(diff)
    raise ValueError(f"unknown KL estimator {kind!r}; known: {', '.join(KL_KINDS)}")
