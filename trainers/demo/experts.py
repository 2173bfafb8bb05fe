"""Expert trajectories for the demo's SFT stage: some call the calculator, the rest answer directly.

With the tool the expert copies the calculator's output into `\\boxed{}`; without it, it writes the
right answer from nowhere, which a tiny model can imitate in form but not in content. SFT therefore
leaves a policy that calls the tool only some of the time, and RL has something to discover.
"""

from __future__ import annotations

import asyncio
import json
import random
from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

from trainers.demo.arithmetic import Problem
from trainers.tools.base import TOOLS

THINK_TOOL = "<think>I will use the calculator.</think>"
THINK_READ = "<think>The calculator gave the result.</think>"
THINK_DIRECT = "<think>I can answer directly.</think>"


def calculator_outputs(expressions: Sequence[str]) -> list[str]:
    """Run the real calculator tool, so expert tool responses read exactly like RL's."""
    tool = TOOLS.get("calculator")()

    async def run_all() -> list[str]:
        results = await asyncio.gather(*(tool.invoke({"expression": e}) for e in expressions))
        return [r.output for r in results]

    try:
        asyncio.get_running_loop()
    except RuntimeError:
        return asyncio.run(run_all())
    # Called from a running event loop (an async caller, a Playwright test): run them in a thread of its own.
    with ThreadPoolExecutor(max_workers=1) as pool:
        return pool.submit(asyncio.run, run_all()).result()


def tool_messages(problem: Problem, output: str) -> list[dict[str, Any]]:
    call = {"name": "calculator", "arguments": {"expression": problem.expression}}
    return [
        {"role": "user", "content": problem.question},
        {"role": "assistant", "content": THINK_TOOL, "tool_calls": [call]},
        {"role": "tool", "name": "calculator", "content": output},
        {"role": "assistant", "content": f"{THINK_READ}\n\\boxed{{{output}}}"},
    ]


def direct_messages(problem: Problem) -> list[dict[str, Any]]:
    return [
        {"role": "user", "content": problem.question},
        {"role": "assistant", "content": f"{THINK_DIRECT}\n\\boxed{{{problem.answer}}}"},
    ]


def make_experts(problems: Sequence[Problem], *, tool_fraction: float = 0.6, seed: int = 0) -> list[dict]:
    """One expert record per problem; a random `tool_fraction` of them use the calculator."""
    rng = random.Random(seed)
    with_tool = [rng.random() < tool_fraction for _ in problems]
    outputs = iter(calculator_outputs([p.expression for p, t in zip(problems, with_tool, strict=True) if t]))
    records = []
    for problem, use_tool in zip(problems, with_tool, strict=True):
        messages = tool_messages(problem, next(outputs)) if use_tool else direct_messages(problem)
        records.append({"messages": messages, "answer": str(problem.answer), "uses_tool": use_tool})
    return records


def write_experts(records: Sequence[dict], path: str | Path) -> Path:
    path = Path(path)
    path.write_text("".join(json.dumps(r) + "\n" for r in records), encoding="utf-8")
    return path
