"""Multi-turn demo (RAGEN): FrozenLake through the `frozenlake` tool, SFT on shortest-path experts, then
GRPO or GiGPO on the environment reward. Each action is one assistant turn, so GiGPO has step groups.
"""

from __future__ import annotations

import asyncio
import random
from collections import deque
from pathlib import Path
from typing import Any

from trainers.config.loader import validate_config
from trainers.envs.base import MOVES
from trainers.envs.frozenlake import FrozenLake
from trainers.metrics import keys
from trainers.tools.toolset import Toolset

QUESTION = "Walk the player P to the goal G without stepping into a hole O. Move with the frozenlake tool."
THINK = "<think>I move {action}.</think>"
MAX_TURNS = 6


def shortest_path(env: FrozenLake) -> list[str]:
    """Breadth-first search over safe cells; the actions of a shortest path from player to goal."""
    start, goal = env.player, env.goal
    previous: dict[tuple[int, int], tuple[tuple[int, int], str] | None] = {start: None}
    frontier = deque([start])
    while frontier:
        cell = frontier.popleft()
        if cell == goal:
            break
        for action, (dr, dc) in MOVES.items():
            nxt = (cell[0] + dr, cell[1] + dc)
            inside = 0 <= nxt[0] < env.shape[0] and 0 <= nxt[1] < env.shape[1]
            if inside and nxt not in env.holes and nxt not in previous:
                previous[nxt] = (cell, action)
                frontier.append(nxt)
    actions, cell = [], goal
    while previous.get(cell) is not None:
        cell, action = previous[cell]
        actions.append(action)
    return actions[::-1]


def expert_record(seed: int) -> dict[str, Any] | None:
    """One shortest-path episode with the real tool's responses, or None if the level is too long."""
    toolset = Toolset.build(["frozenlake"], seed=seed)
    env = toolset.environment
    observation = env.observation()
    path = shortest_path(env)
    if not path or len(path) > MAX_TURNS:
        return None
    tool = toolset.tools["frozenlake"]
    messages: list[dict[str, Any]] = [{"role": "user", "content": QUESTION}]
    for action in path:
        call = {"name": "frozenlake", "arguments": {"action": action}}
        messages.append({"role": "assistant", "content": THINK.format(action=action), "tool_calls": [call]})
        result = asyncio.run(tool.invoke({"action": action}))
        messages.append({"role": "tool", "name": "frozenlake", "content": result.output})
    return {"messages": messages, "observation": observation}


def make_lake_experts(n: int, seed: int = 0) -> list[dict[str, Any]]:
    rng, records = random.Random(seed), []
    while len(records) < n:
        record = expert_record(rng.randrange(2**31))
        if record is not None:
            records.append(record)
    return records


def lake_rows(n: int) -> list[dict[str, Any]]:
    """Prompt rows; the engine seeds each group's level from the run seed and the row id."""
    return [{"id": f"lake{i}", "question": QUESTION} for i in range(n)]


def lake_config(estimator: str, out: Path, model_dir: Path, train_path: Path, **overrides: Any) -> Any:
    """StarPO-style run: env reward summed per episode, GRPO or GiGPO advantages."""
    base = {
        "output_dir": str(out),
        "model": {"path": str(model_dir)},
        "template": {"name": "qwen_tool"},
        "tools": [{"name": "frozenlake"}],
        "limits": {"max_turns": MAX_TURNS, "max_tool_calls": MAX_TURNS, "max_new_tokens_per_turn": 32,
                   "max_total_new_tokens": 32 * MAX_TURNS},
        "rollout": {"prompts_per_step": 4, "samples_per_prompt": 8},
        "reward": {"components": [{"name": "env"}]},
        "algorithm": {"estimator": estimator},
        "optimizer": {"lr": 3e-4},
        "training": {"steps": 10},
        "checkpoint": {"every_steps": 1000},
        "data": {"train_path": str(train_path)},
    }  # fmt: skip
    base.update(overrides)
    return validate_config(base)


def run_lake_demo(
    out: str | Path, *, estimator: str = "gigpo", seed: int = 0, sft_steps: int = 200, rl_steps: int = 15
) -> dict[str, float]:
    """SFT on 400 shortest-path experts, then RL on the environment reward; returns the success rates
    (env reward mean) of the first and last RL steps' rollouts and of the best step."""
    import json

    from trainers.demo.model import build_demo_model
    from trainers.templates import TEMPLATES
    from trainers.training.model_io import load_policy
    from trainers.training.run import run_config
    from trainers.training.sft import render_experts, sft_train
    from trainers.training.sinks import read_jsonl

    out = Path(out)
    out.mkdir(parents=True, exist_ok=True)
    records = make_lake_experts(400, seed=seed)
    template, tools = TEMPLATES.get("qwen_tool")(), Toolset.build(["frozenlake"]).specs()
    # Moves need no copying, so a smaller model than the calculator demo's learns the format quickly.
    base = build_demo_model(out / "base", records, template=template, tools=tools, seed=seed, hidden_size=64,
                            num_layers=2, num_heads=2, num_kv_heads=1)  # fmt: skip
    model, tokenizer = load_policy(base)
    examples = render_experts(records, template=template, tokenizer=tokenizer, tools=tools)
    sft_train(model, examples, pad_token_id=tokenizer.pad_token_id, steps=sft_steps, batch_size=16, lr=3e-3,
              seed=seed)  # fmt: skip
    rows = out / "rows.jsonl"
    rows.write_text("".join(json.dumps(r) + "\n" for r in lake_rows(256)), encoding="utf-8")
    config = lake_config(estimator, out / estimator, base, rows, seed=seed, training={"steps": rl_steps})
    run_config(config, model=model, tokenizer=tokenizer)
    rewards = [m[keys.REWARD_MEAN] for m in read_jsonl(out / estimator / "metrics.jsonl")]
    return {"first_step": rewards[0], "last_step": rewards[-1], "best_step": max(rewards)}
