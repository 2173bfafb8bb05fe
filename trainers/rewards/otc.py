"""OTC tool-efficiency reward (arXiv 2504.14870, sec. 3): r = alpha * r_tool(m, n) * r_correct.

m is the trajectory's number of executed tool calls (`executed_calls`).
OTC-PPO:  r_tool = cos(m * pi / (2m + c)).
OTC-GRPO: n = fewest calls among the group's correct responses (0 when none is correct) and
          f(m, n) = 0 if m = n = 0; m if n = 0; 2nm / (m + n) otherwise;
          r_tool = 1 if f(m, n) = n = 0; cos(m * pi / (2m + c)) if n = 0; sin(f(m, n) * pi / (2n)) otherwise.
The GRPO form peaks at m = n and falls to 0 at m = 0 and as m grows; a wrong answer scores 0.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field

from trainers.rewards.base import REWARDS, RewardComponent, RewardContext
from trainers.rewards.correctness import CorrectnessParams, Mode, is_correct
from trainers.trajectory import Trajectory


class OTCParams(BaseModel):
    model_config = ConfigDict(extra="forbid")

    variant: Literal["grpo", "ppo"] = Field("grpo", description="grpo: relative to the group's fewest calls")
    c: float = Field(1.0, gt=0.0, description="smoothing constant of the cosine form")
    alpha: float = Field(1.0, description="scale of the combined reward")
    mode: Mode = Field("math", description="how the final answer is compared with the ground truth")


def executed_calls(trajectory: Trajectory) -> int:
    """OTC's m: the calls that ran, each failed run included.

    Calls past the call budget C never ran (the rollout records them `executed=False`): under ToRL's
    limit they are plain text, under ZeroTIR's they get the limit notice. Malformed calls and calls to
    an unknown tool are rejected without running (also `executed=False`) and do not count either: they
    cost a turn and its tokens, which the turn and token limits bound (and a format reward can
    penalise), but no tool time, and brought nothing from the tool; OTC prices tool use. Counting them
    would also let a junk call stand in for a real one: under OTC-GRPO with n >= 1 an answer with
    m = 0 scores sin(0) = 0, and a deliberate malformed call would raise it to the peak at m = n.
    A call with no recorded result (a hand-built trajectory, a pasted sample) counts as run.
    """
    count = 0
    for turn in trajectory.turns:
        for i in range(len(turn.tool_calls)):  # the rollout records one result per call, in order
            result = turn.tool_results[i] if i < len(turn.tool_results) else None
            count += result is None or result.executed
    return count


def ppo_tool_reward(m: int, c: float) -> float:
    """OTC-PPO: cos(m * pi / (2m + c))."""
    return math.cos(m * math.pi / (2 * m + c))


def mapping(m: int, n: int) -> float:
    """OTC-GRPO's f(m, n): equals n at m = n, 0 at m = 0, tends to 2n as m grows."""
    if m == 0 and n == 0:
        return 0.0
    if n == 0:
        return float(m)
    return 2.0 * n * m / (m + n)


def grpo_tool_reward(m: int, n: int, c: float) -> float:
    """OTC-GRPO's r_tool(m, n)."""
    f = mapping(m, n)
    if n == 0:
        return 1.0 if f == 0 else ppo_tool_reward(m, c)
    return math.sin(f * math.pi / (2 * n))


@REWARDS.register("otc")
class OTC(RewardComponent):
    """Correctness times tool efficiency: correct answers with fewer calls score higher."""

    name = "otc"
    Params = OTCParams
    params: OTCParams

    def score(self, trajectory: Trajectory, ctx: RewardContext) -> float:
        return self.score_group([trajectory], ctx)[0]

    def score_group(self, trajectories: Sequence[Trajectory], ctx: RewardContext) -> list[float]:
        check = CorrectnessParams(mode=self.params.mode)
        correct = [is_correct(t, check) for t in trajectories]
        calls = [executed_calls(t) for t in trajectories]
        n = min((m for m, ok in zip(calls, correct, strict=True) if ok), default=0)
        out = []
        for m, ok in zip(calls, correct, strict=True):
            if self.params.variant == "ppo":
                tool = ppo_tool_reward(m, self.params.c)
            else:
                tool = grpo_tool_reward(m, n, self.params.c)
            out.append(self.params.alpha * tool * (1.0 if ok else 0.0))
        return out
