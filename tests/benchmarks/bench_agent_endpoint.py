"""The agent endpoint's cost per episode: the calculator task as an agent program (an OpenAI-client tool
loop in the sandbox, over the endpoint) against the built-in calculator rollout, same policy and batch.

Run: .venv/bin/python tests/benchmarks/bench_agent_endpoint.py [--rows 16 --samples 4 --rounds 5].
Not collected by pytest. The policy is the short demo's SFT calculator policy (built first, about a
minute), so both sides make tool calls; rounds alternate which side goes first. Reported: each side's
median seconds per rollout, the ratio (target: within 1.3x of the built-in rollout), the endpoint's
overhead per episode, and both sides' tool-call rates and requests, to show like is compared with like.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

import torch

from tests.trainers.conftest import DEMO_SFT, build_demo_sft
from trainers.agent.program import AgentProgram
from trainers.agent.rollouts import AgentRollouts
from trainers.backends.hf import HFBackend
from trainers.config.agent import AgentConfig
from trainers.config.limits import RolloutLimits
from trainers.config.sampling import SamplingParams
from trainers.demo.recipe import LIMITS
from trainers.models.model_io import load_policy
from trainers.rollout.engine import RolloutEngine

PROGRAM = Path(__file__).resolve().parents[2] / "trainers" / "demo" / "agents" / "calculator.py"


def rollouts(model_dir: Path, episodes: int) -> dict[str, object]:
    """Both sides over one live model: the built-in engine and the agent program's rollouts."""
    model, tokenizer = load_policy(model_dir)
    model.eval()
    backend = HFBackend(model, tokenizer)
    limits, sampling = RolloutLimits(**LIMITS), SamplingParams(temperature=1.0)
    config = AgentConfig(program=str(PROGRAM), wall_s=120, concurrency=episodes)
    return {
        "built-in": RolloutEngine(backend, "qwen_tool", ["calculator"], limits, sampling),
        "agent": AgentRollouts(
            backend, "qwen_tool", AgentProgram.from_config(config), config, limits, sampling
        ),
    }


def measure(side, rows: list[dict], samples: int, seed: int) -> tuple[float, dict]:
    start = time.perf_counter()
    with torch.no_grad():
        trajectories = side.run(rows, samples, seed=seed)
    elapsed = time.perf_counter() - start
    n = len(trajectories)
    shape = {
        "trajectories": n,
        "tool_calls_per_trajectory": sum(t.num_tool_calls for t in trajectories) / n,
        "assistant_turns_per_trajectory": sum(len(t.assistant_turns) for t in trajectories) / n,
        "batches": side.last_stats.batches if side.last_stats else None,
    }
    return elapsed, shape


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--rows", type=int, default=16)
    parser.add_argument("--samples", type=int, default=4)
    parser.add_argument("--rounds", type=int, default=5)
    args = parser.parse_args()
    torch.set_num_threads(1)
    with tempfile.TemporaryDirectory() as tmp:
        out = Path(tmp)
        build_demo_sft(out, DEMO_SFT)
        rows = [json.loads(line) for line in (out / "val.jsonl").read_text().splitlines()][: args.rows]
        sides = rollouts(out / "sft", args.rows * args.samples)
        for side in sides.values():  # warm: the sandbox pool, the model's first forward
            measure(side, rows[:2], 2, seed=-1)
        times: dict[str, list[float]] = {name: [] for name in sides}
        shapes: dict[str, dict] = {}
        for round_index in range(args.rounds):
            order = list(sides) if round_index % 2 == 0 else list(reversed(sides))
            for name in order:
                elapsed, shapes[name] = measure(sides[name], rows, args.samples, seed=round_index)
                times[name].append(elapsed)
    medians = {name: statistics.median(values) for name, values in times.items()}
    episodes = args.rows * args.samples
    report = {
        "episodes_per_rollout": episodes,
        "median_s": medians,
        "rounds_s": times,
        "ratio_agent_over_builtin": medians["agent"] / medians["built-in"],
        "overhead_per_episode_ms": 1000 * (medians["agent"] - medians["built-in"]) / episodes,
        "shape": shapes,
        "target": "ratio <= 1.3",
    }
    print(json.dumps(report, indent=2))


if __name__ == "__main__":
    main()
