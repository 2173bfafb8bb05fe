"""GRPO step throughput: our training loop against TRL's `GRPOTrainer` on the same tiny model and batch.

8 prompts x 8 completions, 32 new tokens, no KL, 2 CPU threads. The two run interleaved (ours, TRL,
ours, TRL, ...), each in its own subprocess so that peak memory (ru_maxrss) is the run's own.
Usage: python tests/benchmarks/bench_grpo_vs_trl.py [--rounds 5] [--steps 8] [--threads 2]
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))  # `make bench` runs this file directly

PROMPTS, GENERATIONS, NEW_TOKENS = 8, 8, 32
# What TRL renders for a one-message conversation with the tiny tokenizer's chat template: same tokens in.
CHAT_PROMPT = "<|im_start|>user\n{{ question }}<|im_end|>\n<|im_start|>assistant\n"


def digit_fraction(text: str) -> float:
    """The benchmark reward: varies between random samples, so both trainers do a real update."""
    return sum(c.isdigit() for c in text) / max(1, len(text))


def questions(n: int) -> list[dict]:
    from trainers.demo.arithmetic import make_splits

    train, _ = make_splits(n, 0, seed=0)
    return [p.row() for p in train]


PHASES = ("time/generation", "time/rollout", "time/update", "time/step")


def run_ours(model_dir: Path, steps: int, out: Path) -> tuple[float, dict[str, float]]:
    """Seconds per step of our loop (rollout with the HF backend, reward, GRPO advantages, update), and
    the median seconds of each phase the loop times (generation, the whole rollout, update, step)."""
    from trainers.config.loader import validate_config
    from trainers.rewards import REWARDS, RewardComponent
    from trainers.rewards.base import assistant_text
    from trainers.training.build import build_trainer

    @REWARDS.register("bench_digit_fraction")
    class DigitFraction(RewardComponent):
        name = "bench_digit_fraction"

        def score(self, trajectory, ctx):
            return digit_fraction(assistant_text(trajectory))

    rows = out / "train.jsonl"
    with rows.open("w") as handle:
        handle.writelines(json.dumps(r) + "\n" for r in questions(PROMPTS * (steps + 1)))
    config = validate_config({
        "output_dir": str(out / "run"),
        "model": {"path": str(model_dir)},
        "template": {"name": "qwen_tool", "source": CHAT_PROMPT},
        "limits": {"max_turns": 1, "max_new_tokens_per_turn": NEW_TOKENS, "max_total_new_tokens": NEW_TOKENS},
        "rollout": {"prompts_per_step": PROMPTS, "samples_per_prompt": GENERATIONS},
        "reward": {"components": [{"name": "bench_digit_fraction"}]},
        "algorithm": {"estimator": "grpo"},
        "optimizer": {"lr": 1e-4},
        "training": {"steps": steps + 1},
        "echo_trap": {"enabled": False},
        "checkpoint": {"every_steps": 10_000},
        "data": {"train_path": str(rows)},
    })  # fmt: skip
    trainer = build_trainer(config)
    trainer.run_step(1)  # warm-up: first-call allocations
    start, logged = time.perf_counter(), []
    for step in range(2, steps + 2):
        logged.append(trainer.run_step(step))
        trainer.sink.log_metrics(step, logged[-1])
    seconds = (time.perf_counter() - start) / steps
    return seconds, {phase: statistics.median(m[phase] for m in logged if phase in m) for phase in PHASES}


def run_trl(model_dir: Path, steps: int, out: Path) -> tuple[float, dict[str, float]]:
    """Seconds per step of TRL's GRPOTrainer: one generation of 64 completions and one update per step."""
    from datasets import Dataset
    from transformers import AutoModelForCausalLM, PreTrainedTokenizerFast, TrainerCallback
    from trl import GRPOConfig, GRPOTrainer

    tokenizer = PreTrainedTokenizerFast.from_pretrained(str(model_dir))
    tokenizer.padding_side = "left"
    model = AutoModelForCausalLM.from_pretrained(str(model_dir))
    prompts = [[{"role": "user", "content": r["question"]}] for r in questions(PROMPTS * (steps + 1))]
    dataset = Dataset.from_dict({"prompt": prompts})

    def reward(completions, **kwargs):
        return [digit_fraction(c[0]["content"] if isinstance(c, list) else c) for c in completions]

    times: list[float] = []

    class StepTimer(TrainerCallback):
        def on_step_begin(self, args, state, control, **kwargs):
            times.append(time.perf_counter())

        def on_train_end(self, args, state, control, **kwargs):
            times.append(time.perf_counter())

    args = GRPOConfig(
        output_dir=str(out / "trl"),
        per_device_train_batch_size=PROMPTS * GENERATIONS,
        num_generations=GENERATIONS,
        steps_per_generation=1,
        gradient_accumulation_steps=1,
        max_completion_length=NEW_TOKENS,
        beta=0.0,
        learning_rate=1e-4,
        max_steps=steps + 1,
        use_cpu=True,
        report_to="none",
        save_strategy="no",
        logging_steps=10_000,
        disable_tqdm=True,
        seed=0,
    )
    trainer = GRPOTrainer(
        model=model, reward_funcs=reward, args=args, train_dataset=dataset, processing_class=tokenizer,
        callbacks=[StepTimer()],
    )  # fmt: skip
    trainer.train()
    return (times[-1] - times[1]) / steps, {}  # from the second step: the first is warm-up


def worker(kind: str, model_dir: Path, steps: int, threads: int) -> None:
    import torch

    torch.set_num_threads(threads)
    with tempfile.TemporaryDirectory() as tmp:
        seconds, phases = (run_ours if kind == "ours" else run_trl)(model_dir, steps, Path(tmp))
    peak_mb = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024  # Linux reports KiB
    result = {"kind": kind, "s_per_step": seconds, "completions_per_s": PROMPTS * GENERATIONS / seconds}
    print(json.dumps({**result, "peak_mb": peak_mb, "phases_s": phases}))


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--steps", type=int, default=8, help="timed steps per run (after one warm-up)")
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--worker", choices=["ours", "trl"])
    parser.add_argument("--model", type=Path)
    args = parser.parse_args()
    if args.worker:
        worker(args.worker, args.model, args.steps, args.threads)
        return
    from trainers.models.tiny import build_tiny_model

    env = {**os.environ, "OMP_NUM_THREADS": str(args.threads), "TOKENIZERS_PARALLELISM": "false"}
    results: dict[str, list[dict]] = {"ours": [], "trl": []}
    with tempfile.TemporaryDirectory() as tmp:
        model_dir = build_tiny_model(Path(tmp) / "tiny")
        for _ in range(args.rounds):
            for kind in ("ours", "trl"):
                cmd = [sys.executable, __file__, "--worker", kind, "--model", str(model_dir),
                       "--steps", str(args.steps), "--threads", str(args.threads)]  # fmt: skip
                proc = subprocess.run(cmd, capture_output=True, text=True, env=env, check=True)
                results[kind].append(json.loads(proc.stdout.strip().splitlines()[-1]))
                print(json.dumps(results[kind][-1]), flush=True)
    summary = {}
    for kind, runs in results.items():
        summary[kind] = {
            "completions_per_s": statistics.median(r["completions_per_s"] for r in runs),
            "s_per_step": statistics.median(r["s_per_step"] for r in runs),
            "peak_mb": max(r["peak_mb"] for r in runs),
        }
    summary["ours"]["phases_s"] = {
        phase: statistics.median(r["phases_s"][phase] for r in results["ours"]) for phase in PHASES
    }
    summary["speedup"] = summary["ours"]["completions_per_s"] / summary["trl"]["completions_per_s"]
    # each round's pair ran back to back, so its ratio is the least affected by the machine's drift
    rounds = zip(results["ours"], results["trl"], strict=True)
    pairs = sorted(o["completions_per_s"] / t["completions_per_s"] for o, t in rounds)
    summary["speedup_per_round"] = {"min": pairs[0], "median": statistics.median(pairs), "max": pairs[-1]}
    print(json.dumps(summary, indent=2))


if __name__ == "__main__":
    main()
