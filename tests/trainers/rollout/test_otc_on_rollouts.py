"""OTC's m on real rollouts: only the calls the engine ran count, not the calls past the cap C it skipped."""

from __future__ import annotations

import json

import pytest

from trainers.config.limits import RolloutLimits
from trainers.rewards import REWARDS, RewardContext
from trainers.rewards.otc import executed_calls
from trainers.rollout.engine import RolloutEngine

OTC_PPO = REWARDS.get("otc")(variant="ppo", c=1.0)


def rollout(backend, limits: RolloutLimits, template: str, tools: list[str]):
    engine = RolloutEngine(backend, template, tools, limits)
    return engine.run([{"id": "q", "question": "go", "answer": "2"}])[0]


def test_torl_code_past_the_limit_is_not_a_call(scripted):
    def respond(prompt: str) -> str:
        if "```output\n" not in prompt:
            return "Let me compute.\n```python\nprint(1)\n```\n"
        return "Again:\n```python\nprint(2)\n```\nSo \\boxed{2}<|im_end|>"

    limits = RolloutLimits(max_tool_calls=1, on_tool_limit="continue_text")
    traj = rollout(scripted(respond), limits, "torl", ["test_code"])
    assert traj.num_tool_calls == 2 and [r.executed for r in traj.tool_results] == [True, False]
    assert executed_calls(traj) == 1
    # C = 1: two code blocks, the first ran. m = 1, c = 1: cos(1 * pi / (2 * 1 + 1)) = cos(pi / 3) = 0.5
    # (counting both, m = 2: cos(2 * pi / 5) = 0.309)
    assert OTC_PPO.score(traj, RewardContext()) == pytest.approx(0.5)


def test_a_malformed_call_is_not_a_call(scripted):
    good = json.dumps({"name": "test_sleep", "arguments": {"text": "x", "seconds": 0}})

    def respond(prompt: str) -> str:
        if "<tool_response>" not in prompt:
            return "<tool_call>{not json}</tool_call>"
        if "echo x" not in prompt:
            return f"<tool_call>{good}</tool_call>"
        return "\\boxed{2}<|im_end|>"

    traj = rollout(scripted(respond), RolloutLimits(max_tool_calls=2), "qwen_tool", ["test_sleep"])
    assert [c.parse_error is not None for c in traj.tool_calls] == [True, False]
    assert [r.executed for r in traj.tool_results] == [False, True]
    assert executed_calls(traj) == 1
    # m = 1 (the malformed call ran nothing), c = 1: cos(pi / 3) = 0.5
    assert OTC_PPO.score(traj, RewardContext()) == pytest.approx(0.5)
