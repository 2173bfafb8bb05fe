"""Distributed rollouts: 64 multi-turn trajectories x 3 tool calls of 100 ms, in-process against jobs on
1 and 2 rollout worker processes (one torch thread each), and weight publish + load times.

Run: .venv/bin/python tests/benchmarks/bench_distributed_rollouts.py [--rows 64 --latency 0.1
--jobs-per-worker 1 --big]. Not collected by pytest.
Targets: at 1 worker, job dispatch + the weight-version check add < 10% to a step's rollout (steady
state: the weights did not change since the last rollout); 2 workers faster than 1.

The workload is bench_overlap's: the random tiny policy, a template that counts each turn as one call to
a sleeping tool; workers are spawned processes with their own loaded policy (the `PoolDispatcher`), and
weights go through a local artifact store as they would through a shared one. Also timed: a step whose
weights changed (publish + every worker loading the new version), and publishing and loading the tiny
model and, with --big, a randomly initialised model of Qwen2.5-0.5B's shape.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

import torch

from tests.benchmarks.bench_overlap import CALLS, TOKENS_PER_TURN, EveryTurnCalls  # registers bench_sleep
from trainers.backends.hf import HFBackend
from trainers.config.limits import RolloutLimits
from trainers.config.sampling import SamplingParams
from trainers.models.model_io import load_policy
from trainers.models.tiny import build_tiny_model
from trainers.rollout.engine import RolloutEngine
from trainers.rollout.remote.client import RemoteRollouts
from trainers.rollout.remote.dispatch import PoolDispatcher
from trainers.rollout.remote.wire import rollout_spec
from trainers.storage.store import ArtifactStore
from trainers.storage.weights import load_published_policy, load_version, publish_weights
from trainers.templates import TEMPLATES

TEMPLATE = "bench_every_turn_calls"
LATENCY_ENV = "BENCH_TOOL_LATENCY"  # spawned workers build the template by name: its latency comes from here
PROMPT = "Q: {{ question }}\nA:"


@TEMPLATES.register(TEMPLATE)
class EnvLatencyTurnCalls(EveryTurnCalls):
    """bench_overlap's template, built by name on a worker, with the tool latency of the environment."""

    def __init__(self, **kwargs: Any) -> None:
        super().__init__(float(os.environ.get(LATENCY_ENV, "0.1")), **kwargs)


LIMITS = RolloutLimits(
    max_tool_calls=CALLS, on_tool_limit="continue_text", max_turns=CALLS + 1,
    max_new_tokens_per_turn=TOKENS_PER_TURN, max_total_new_tokens=TOKENS_PER_TURN * (CALLS + 1),
)  # fmt: skip


def timed(fn) -> tuple[float, Any]:
    start = time.perf_counter()
    out = fn()
    return time.perf_counter() - start, out


def token_ids(trajectories) -> list[list[list[int]]]:
    return [[turn.token_ids for turn in t.turns] for t in trajectories]


def remote_rollouts(model, tokenizer, workers: int, store_url: str, args: argparse.Namespace):
    dispatcher = PoolDispatcher(store_url, workers=workers, processes=True, threads_per_worker=1)
    spec = rollout_spec(TEMPLATE, PROMPT, ["bench_sleep"], LIMITS, SamplingParams())
    rollouts = RemoteRollouts(
        model, tokenizer, dispatcher, spec, prompts_per_job=args.prompts_per_job,
        jobs_per_worker=args.jobs_per_worker,
    )  # fmt: skip
    return rollouts, dispatcher


def bench_rollouts(args: argparse.Namespace) -> dict[str, Any]:
    model, tokenizer = load_policy(build_tiny_model(tempfile.mkdtemp()))
    model.eval()
    rows = [{"id": str(i), "question": f"What is {i} + {2 * i}?"} for i in range(args.rows)]
    local = RolloutEngine(HFBackend(model, tokenizer), TEMPLATE, ["bench_sleep"], LIMITS, SamplingParams(),
                          prompt_source=PROMPT)  # fmt: skip
    local.run(rows[:2], seed=0)  # warm-up
    remotes = {}
    for workers in (1, 2):
        remotes[workers] = remote_rollouts(model, tokenizer, workers, tempfile.mkdtemp(), args)
        remotes[workers][0].run(rows, seed=0)  # start the processes, load the policy, warm up
    times: dict[str, list[float]] = {"in_process": [], "workers_1": [], "workers_2": []}
    outputs: dict[str, Any] = {}
    for _ in range(args.repeats):  # interleaved, so load from other processes hits every variant alike
        seconds, outputs["in_process"] = timed(lambda: local.run(rows, seed=0))
        times["in_process"].append(seconds)
        for workers, (rollouts, _) in remotes.items():
            seconds, outputs[f"workers_{workers}"] = timed(lambda r=rollouts: r.run(rows, seed=0))
            times[f"workers_{workers}"].append(seconds)
    for name in ("workers_1", "workers_2"):
        assert token_ids(outputs[name]) == token_ids(outputs["in_process"]), f"{name}: other trajectories"
    # a step after an update: publish a new version, every worker loads it before its first job
    rollouts_1 = remotes[1][0]
    changed = []
    for version in range(1, args.repeats + 1):
        rollouts_1.policy_changed(version)  # as after an update: published as a new weight version
        changed.append(timed(lambda: rollouts_1.run(rows, seed=0))[0])
    metrics = dict(rollouts_1.last_metrics)
    for _, dispatcher in remotes.values():
        dispatcher.close()
    best = {name: min(values) for name, values in times.items()}
    return {
        "trajectories": args.rows,
        "tool_calls_each": CALLS,
        "tool_latency_s": args.latency,
        "prompts_per_job": args.prompts_per_job,
        "jobs_per_worker": args.jobs_per_worker,
        "in_process_s": round(best["in_process"], 3),
        "workers_1_s": round(best["workers_1"], 3),
        "workers_2_s": round(best["workers_2"], 3),
        "workers_1_new_weights_s": round(min(changed), 3),
        "trajectories_per_s": {name: round(args.rows / s, 1) for name, s in best.items()},
        "overhead_1_worker": round(best["workers_1"] / best["in_process"] - 1.0, 3),
        "overhead_1_worker_new_weights": round(min(changed) / best["in_process"] - 1.0, 3),
        "speedup_2_over_1": round(best["workers_1"] / best["workers_2"], 2),
        "last_step_metrics": {k: round(v, 4) for k, v in metrics.items()},
    }


def bench_weights(model: Any, tokenizer: Any, repeats: int) -> dict[str, float]:
    """Publishing a version (save + upload into the store) and a worker's first build and in-place load."""
    store = ArtifactStore.from_url(tempfile.mkdtemp())
    publish = [
        timed(lambda: publish_weights(store, "weights", model, tokenizer, keep=2))[0] for _ in range(repeats)
    ]
    build_s, (worker, _) = timed(lambda: load_published_policy(store, "weights", repeats))
    load = [timed(lambda: load_version(store, "weights", repeats, worker))[0] for _ in range(repeats)]
    params = sum(p.numel() for p in model.parameters())
    return {"parameters_m": round(params / 1e6, 1), "publish_s": round(min(publish), 3),
            "first_build_s": round(build_s, 3), "load_in_place_s": round(min(load), 3)}  # fmt: skip


def qwen_05b_shaped() -> tuple[Any, Any]:
    """Qwen2.5-0.5B's shape (24 layers, hidden 896, vocab 151936, tied embeddings), random weights."""
    from transformers import Qwen2Config, Qwen2ForCausalLM

    from trainers.models.tiny import build_tokenizer

    config = Qwen2Config(
        vocab_size=151936, hidden_size=896, intermediate_size=4864, num_hidden_layers=24,
        num_attention_heads=14, num_key_value_heads=2, max_position_embeddings=4096, tie_word_embeddings=True,
    )  # fmt: skip
    return Qwen2ForCausalLM(config), build_tokenizer()


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--rows", type=int, default=64)
    parser.add_argument("--latency", type=float, default=0.1)
    parser.add_argument("--prompts-per-job", type=int, default=None, help="default: from jobs per worker")
    parser.add_argument("--jobs-per-worker", type=int, default=1)
    parser.add_argument("--repeats", type=int, default=3, help="best of n: the shared machine is noisy")
    parser.add_argument("--big", action="store_true", help="also time a 0.5B-shaped model's weights")
    args = parser.parse_args()
    os.environ[LATENCY_ENV] = str(args.latency)
    torch.set_num_threads(1)
    result = bench_rollouts(args)
    tiny, tiny_tokenizer = load_policy(build_tiny_model(tempfile.mkdtemp()))
    result["weights_tiny"] = bench_weights(tiny, tiny_tokenizer, args.repeats)
    if args.big:
        result["weights_qwen_0.5b_shape"] = bench_weights(*qwen_05b_shaped(), repeats=2)
    print(json.dumps(result, indent=2))
    print("\n| rollout | seconds | trajectories/s |\n|---|---|---|")
    for name in ("in_process", "workers_1", "workers_2"):
        print(f"| {name.replace('_', ' ')} | {result[f'{name}_s']} | {result['trajectories_per_s'][name]} |")
    print(
        f"\n1 worker adds {100 * result['overhead_1_worker']:.1f}% to the in-process rollout (target < 10%),"
        f" {100 * result['overhead_1_worker_new_weights']:.1f}% with new weights to publish and load;"
        f" 2 workers are {result['speedup_2_over_1']}x 1 worker (target > 1)"
    )


if __name__ == "__main__":
    main()
