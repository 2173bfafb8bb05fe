"""Build an `AdvantageBatch` from Trajectory records (the rollout's output)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING

from trainers.advantages.base import AdvantageBatch, AdvantageResult, Step
from trainers.trajectory import Trajectory

if TYPE_CHECKING:
    import torch


def trajectory_steps(trajectory: Trajectory) -> list[Step]:
    """One Step per assistant turn, with its token span in the response.

    Step reward: the turn's env_reward; a trajectory without any env reward gets its scalar reward
    on its last step (outcome supervision). The state acted from is `state_hash`; its text is the
    `state` the environment returned after the previous step (metadata["initial_state"] for the first).
    """
    steps: list[Step] = []
    offset = 0
    has_env_rewards = any(t.env_reward is not None for t in trajectory.assistant_turns)
    previous_state = trajectory.metadata.get("initial_state")
    for turn in trajectory.response_turns:
        if turn.role == "assistant":
            reward = (turn.env_reward or 0.0) if has_env_rewards else 0.0
            steps.append(Step(offset, offset + len(turn.token_ids), reward, turn.state_hash, previous_state))
            previous_state = turn.state
        offset += len(turn.token_ids)
    if steps and not has_env_rewards:
        last = steps[-1]
        steps[-1] = Step(last.start, last.end, trajectory.reward, last.state_hash, last.state_text)
    return steps


def advantage_batch_from_trajectories(
    trajectories: Sequence[Trajectory],
    *,
    pad_to: int | None = None,
    values: torch.Tensor | None = None,
    token_rewards: torch.Tensor | None = None,
    kl: torch.Tensor | None = None,
    baseline_rewards: dict[str, float] | None = None,
) -> AdvantageBatch:
    """Rows follow `trajectories`; columns are response tokens right-padded to `pad_to` (default: longest)."""
    import torch  # here, not at module level: the run config imports this package (see base)

    length = max((len(t.response_loss_mask) for t in trajectories), default=0)
    width = length if pad_to is None else pad_to
    if width < length:
        raise ValueError(f"pad_to={pad_to} is shorter than the longest response ({length} tokens)")
    mask = torch.zeros(len(trajectories), width)
    for row, trajectory in enumerate(trajectories):
        row_mask = trajectory.response_loss_mask
        mask[row, : len(row_mask)] = torch.tensor(row_mask, dtype=torch.float32)
    return AdvantageBatch(
        group_ids=[t.group_id for t in trajectories],
        rewards=torch.tensor([t.reward for t in trajectories], dtype=torch.float32),
        response_mask=mask,
        steps=[trajectory_steps(t) for t in trajectories],
        values=values,
        token_rewards=token_rewards,
        kl=kl,
        baseline_rewards=baseline_rewards,
    )


def write_advantages(trajectories: Sequence[Trajectory], result: AdvantageResult) -> None:
    """Record advantages on the trajectories for the inspector.

    Trajectory.advantage = mean over its policy tokens; each assistant Turn.advantage = its step's
    value; GiGPO's anchor-group key of each step goes to metadata["anchor_groups"].
    """
    mask = result.advantages.new_zeros(result.advantages.shape)
    for row, trajectory in enumerate(trajectories):
        row_mask = trajectory.response_loss_mask
        mask[row, : len(row_mask)] = mask.new_tensor(row_mask)
    totals = (result.advantages * mask).sum(dim=1) / mask.sum(dim=1).clamp(min=1)
    for row, trajectory in enumerate(trajectories):
        trajectory.advantage = float(totals[row])
        turn_values = result.turn_advantages[row] if result.turn_advantages else []
        for turn, value in zip(trajectory.assistant_turns, turn_values, strict=False):
            turn.advantage = value
        if result.step_groups is not None:
            trajectory.metadata["anchor_groups"] = list(result.step_groups[row])
