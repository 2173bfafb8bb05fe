"""GiGPO (arXiv 2505.10978, sec. 4): A = A_E + omega * A_S on the tokens of each step's action.

Episode level (eq. 4): A_E = (R(tau_i) - mean_j R(tau_j)) / F over the trajectory group.
Step level (eqs. 5-7): steps of the same trajectory group that acted from the same state (equal
state hash) form an anchor group; with discounted returns R_t = sum_k gamma^(k-t) r_k,
A_S = (R_t - mean of the anchor group) / F. F is std (+ eps) or 1. A singleton anchor group or a
step without a state gets A_S = 0 (the paper's formula; verl-agent instead keeps the raw return).
Similarity grouping (our option, not in the paper): states whose text similarity (difflib ratio)
reaches `similarity_threshold` share an anchor group, for environments whose states never repeat exactly.
"""

from __future__ import annotations

from difflib import SequenceMatcher
from typing import Any, Literal

from pydantic import Field

from trainers.advantages.base import (
    ESTIMATORS,
    AdvantageBatch,
    AdvantageEstimator,
    AdvantageResult,
    EstimatorParams,
    Step,
    group_indices,
    group_std,
)
from trainers.advantages.grpo import group_normalised


def discounted_step_returns(steps: list[Step], gamma: float) -> list[float]:
    """R_t = r_t + gamma * R_{t+1} over one trajectory's steps."""
    out = [0.0] * len(steps)
    running = 0.0
    for t in reversed(range(len(steps))):
        running = steps[t].reward + gamma * running
        out[t] = running
    return out


class GiGPOParams(EstimatorParams):
    eps: float = Field(1e-6, gt=0.0, description="added to the group std before dividing")
    unbiased_std: bool = Field(True, description="sample std (n-1) rather than population std")
    gigpo_omega: float = Field(1.0, ge=0.0, description="weight of the step-level advantage")
    gigpo_gamma: float = Field(0.95, ge=0.0, le=1.0, description="discount of step returns")
    gigpo_norm: Literal["std", "none"] = Field("std", description="F = std or 1")
    gigpo_similarity: float | None = Field(
        None, gt=0.0, le=1.0, description="group similar states above this; none = exact state hash"
    )

    def estimator_kwargs(self) -> dict[str, Any]:
        return {
            "gamma": self.gigpo_gamma,
            "omega": self.gigpo_omega,
            "norm": self.gigpo_norm,
            "eps": self.eps,
            "unbiased_std": self.unbiased_std,
            "similarity_threshold": self.gigpo_similarity,
        }


@ESTIMATORS.register("gigpo")
class GiGPO(AdvantageEstimator):
    Params = GiGPOParams
    compares_group_samples = True

    def __init__(
        self,
        gamma: float = 0.95,
        omega: float = 1.0,
        norm: Literal["std", "none"] = "std",
        eps: float = 1e-6,
        unbiased_std: bool = True,
        similarity_threshold: float | None = None,
    ) -> None:
        self.gamma = gamma  # discount of step rewards (paper: 0.95)
        self.omega = omega  # weight of the step-level advantage (paper: 1)
        self.norm = norm  # F: "std" divides by the group std, "none" uses F = 1
        self.eps = eps  # keeps zero-variance groups at 0 instead of 0/0
        self.unbiased_std = unbiased_std  # sample std (n-1), as GRPO here
        self.similarity_threshold = similarity_threshold  # None: exact state-hash groups only

    def compute(self, batch: AdvantageBatch) -> AdvantageResult:
        scale = self.norm == "std"
        episode = group_normalised(
            batch.rewards, batch.group_ids, scale=scale, unbiased=self.unbiased_std, eps=self.eps
        )
        keys = self._anchor_keys(batch)
        step_adv = self._step_advantages(batch, keys)
        mask = batch.response_mask
        advantages = episode[:, None] * mask  # policy tokens outside any step keep the episode part
        turn_advantages: list[list[float]] = []
        for row, steps in enumerate(batch.steps):
            combined = [float(episode[row]) + self.omega * a for a in step_adv[row]]
            for step, value in zip(steps, combined, strict=True):
                advantages[row, step.start : step.end] = value * mask[row, step.start : step.end]
            turn_advantages.append(combined)
        return AdvantageResult(advantages, turn_advantages=turn_advantages, step_groups=keys)

    def _step_advantages(self, batch: AdvantageBatch, keys: list[list[str | None]]) -> list[list[float]]:
        returns = [discounted_step_returns(steps, self.gamma) for steps in batch.steps]
        members: dict[str, list[tuple[int, int]]] = {}
        for row, row_keys in enumerate(keys):
            for t, key in enumerate(row_keys):
                if key is not None:
                    members.setdefault(key, []).append((row, t))
        out = [[0.0] * len(r) for r in returns]
        for cells in members.values():
            if len(cells) < 2:
                continue
            values = batch.rewards.double().new_tensor([returns[row][t] for row, t in cells])
            centred = values - values.mean()
            if self.norm == "std":
                centred = centred / (group_std(values, self.unbiased_std) + self.eps)
            for (row, t), a in zip(cells, centred.tolist(), strict=True):
                out[row][t] = a
        return out

    def _anchor_keys(self, batch: AdvantageBatch) -> list[list[str | None]]:
        """The anchor-group key of every step: '<group id>|<state hash>' or '<group id>|sim<k>'."""
        keys: list[list[str | None]] = [[None] * len(steps) for steps in batch.steps]
        for gid, rows in group_indices(batch.group_ids).items():
            representatives: list[str] = []  # similarity mode: the first state text of each cluster
            for row in rows:
                for t, step in enumerate(batch.steps[row]):
                    if step.state_hash is None and step.state_text is None:
                        continue
                    if self.similarity_threshold is not None and step.state_text is not None:
                        keys[row][t] = f"{gid}|sim{self._cluster(step.state_text, representatives)}"
                    else:
                        state = step.state_hash if step.state_hash is not None else step.state_text
                        keys[row][t] = f"{gid}|{state}"
        return keys

    def _cluster(self, text: str, representatives: list[str]) -> int:
        for k, rep in enumerate(representatives):
            if SequenceMatcher(None, rep, text, autojunk=False).ratio() >= self.similarity_threshold:
                return k
        representatives.append(text)
        return len(representatives) - 1
