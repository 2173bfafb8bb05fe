"""Agentic GRPO step throughput: our multi-turn tool loop against TRL's `GRPOTrainer(tools=[...])`.

8 prompts x 8 completions, up to 3 calculator calls per trajectory, each call waits 50 ms
(`asyncio.sleep` before the same calculator code, on both sides; TRL gets an async tool, its fastest
configuration), 2 CPU threads. Both load the same tiny Qwen2 model, warmed by SFT on expert
trajectories that chain one to three calculator calls, so the policy really calls the tool; its
tokenizer carries TRL's Qwen2.5 chat template, so both render the same prompt and tool responses and
TRL can parse the calls. Each side counts the calls its tool function executed: a side that never
called a tool would make the comparison worthless, so the run fails then. The two run interleaved
(ours, TRL, ours, TRL, ...), each in its own subprocess, so that peak memory (VmHWM) is the run's own.
Usage: python tests/benchmarks/bench_agentic_vs_trl.py [--rounds 5] [--steps 4] [--threads 2] [--sft-steps N]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import random
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))  # `make bench` runs this file directly
# Before torch starts OpenMP: on a shared machine, threads that spin while they wait lose their time
# slices to other work (the measured step was up to 4x slower); both sides, and the SFT, wait passively.
os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")

from trainers.parsing.arithmetic import calculate
from trainers.tools.base import TOOLS, ToolOutput
from trainers.tools.calculator import Calculator

MAX_CALLS, LATENCY_S = 3, 0.05
LENGTH = "completions/mean_length"  # TRL's logged policy tokens per completion
# Policy tokens of a whole completion. TRL's max_completion_length also counts the tool responses in
# it, ours only what the policy sampled: neither bound is reached by the warmed policy (see the
# tokens per completion each side reports).
NEW_TOKENS = 192
TOOL = "bench_slow_calculator"
THINK_CALL = "<think>I will use the calculator.</think>"
THINK_ANSWER = "<think>The calculator gave the result.</think>"


@TOOLS.register(TOOL)
class SlowCalculator(Calculator):
    """The calculator after 50 ms of waiting, shown to the model as TRL shows `calculator` below."""

    # What transformers' get_json_schema makes of `calculator`'s signature (checked by `check_same_prompt`)
    parameters = {
        "type": "object",
        "properties": {"expression": {"type": "string", "description": "e.g. (3 + 4.5) * -2 ** 3"}},
        "required": ["expression"],
    }
    executed = 0  # calls that ran, in this process

    async def run(self, arguments: dict) -> ToolOutput:
        await asyncio.sleep(LATENCY_S)
        SlowCalculator.executed += 1
        return await super().run(arguments)


async def calculator(expression: str):  # no return annotation: the schema would show it
    """Evaluate an arithmetic expression with + - * / // % ** and parentheses.

    Args:
        expression: e.g. (3 + 4.5) * -2 ** 3
    """
    await asyncio.sleep(LATENCY_S)
    SlowCalculator.executed += 1
    out = await Calculator().run({"expression": expression})
    return out.output if out.ok else (out.error or "error")


def chat_template() -> str:
    from trl.chat_template_utils import qwen2_5_chat_template

    return qwen2_5_chat_template


# --- tasks and experts ---------------------------------------------------------------------------
def chained_problem(rng: random.Random, index: int) -> dict:
    """`((a op b) op c) op d` with one to three operators: one calculator call per operator."""
    value = rng.randint(10, 999)
    question, steps = str(value), []
    for i in range(rng.randint(1, MAX_CALLS)):
        op, operand = rng.choice("+-*"), rng.randint(2, 99)
        steps.append(f"{value} {op} {operand}")
        value = calculate(steps[-1])
        question = f"{question} {op} {operand}" if i == 0 else f"({question}) {op} {operand}"
    return {"id": f"c{index}", "question": f"What is {question}?", "answer": str(value), "steps": steps}


def problems(n: int, seed: int) -> list[dict]:
    rng = random.Random(seed)
    return [chained_problem(rng, i) for i in range(n)]


def expert(problem: dict) -> dict:
    """The expert calls the calculator once per operator, feeding each result into the next call."""
    messages = [{"role": "user", "content": problem["question"]}]
    for step in problem["steps"]:
        call = {"name": "calculator", "arguments": {"expression": step}}
        messages.append({"role": "assistant", "content": THINK_CALL, "tool_calls": [call]})
        messages.append({"role": "tool", "name": "calculator", "content": repr(calculate(step))})
    messages.append({"role": "assistant", "content": f"{THINK_ANSWER}\n\\boxed{{{problem['answer']}}}"})
    return {"messages": messages}


def digit_fraction(text: str) -> float:
    """The benchmark reward: varies between random samples, so both trainers do a real update."""
    return sum(c.isdigit() for c in text) / max(1, len(text))


def build_policy(out: Path, sft_steps: int, seed: int = 0) -> Path:
    """The tiny model with TRL's Qwen2.5 chat template, after `sft_steps` of SFT on chained experts."""
    import torch

    from trainers.models.model_io import load_policy
    from trainers.models.tiny import build_tiny_model, build_tokenizer
    from trainers.templates.hf_native import HFNativeTemplate
    from trainers.tools.toolset import Toolset
    from trainers.training.sft import render_experts, sft_train
    from trainers.training.tiny_policy import conversation_corpus

    records = [expert(p) for p in problems(400, seed=1)]
    tools = Toolset.build([TOOL]).specs()
    renderer = build_tokenizer()  # only renders text: the corpus the real tokenizer is trained on
    renderer.chat_template = chat_template()
    corpus = conversation_corpus(records, template=HFNativeTemplate(tokenizer=renderer), tools=tools)
    base = build_tiny_model(out / "base", seed=seed, corpus=corpus, split_words=False)
    model, tokenizer = load_policy(base)
    tokenizer.chat_template = chat_template()
    template = HFNativeTemplate(tokenizer=tokenizer)
    examples = render_experts(records, template=template, tokenizer=tokenizer, tools=tools)
    torch.manual_seed(seed)
    sft_train(model, examples, pad_token_id=tokenizer.pad_token_id, steps=sft_steps, batch_size=16,
              lr=3e-3, warmup_steps=10, seed=seed)  # fmt: skip
    model.save_pretrained(out / "policy")
    tokenizer.save_pretrained(out / "policy")
    return out / "policy"


def check_same_prompt(model_dir: Path) -> str:
    """Both sides render the same prompt: our tool spec is the schema transformers makes of `calculator`."""
    from transformers import PreTrainedTokenizerFast

    from trainers.templates.hf_native import HFNativeTemplate
    from trainers.tools.toolset import Toolset

    tokenizer = PreTrainedTokenizerFast.from_pretrained(str(model_dir))
    question = problems(1, seed=2)[0]["question"]
    ours = HFNativeTemplate(tokenizer=tokenizer).render_prompt(
        question=question, tools=Toolset.build([TOOL]).specs()
    )
    trl = tokenizer.apply_chat_template(
        [{"role": "user", "content": question}],
        tools=[calculator],
        add_generation_prompt=True,
        tokenize=False,
    )
    if ours != trl:
        raise AssertionError(f"the two sides' prompts differ:\n{ours!r}\n{trl!r}")
    return ours


# --- the two sides ---------------------------------------------------------------------------------
def run_ours(model_dir: Path, steps: int, out: Path, prompts: int, generations: int) -> dict:
    """Our loop: multi-turn rollout with the HF backend (tool waits overlapped), reward, GRPO, update."""
    from trainers.config.loader import validate_config
    from trainers.metrics import keys
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
        handle.writelines(json.dumps(r) + "\n" for r in problems(prompts * (steps + 1), seed=3))
    config = validate_config({
        "output_dir": str(out / "run"),
        "model": {"path": str(model_dir)},
        "template": {"name": "hf_native"},
        "tools": [{"name": TOOL}],
        "limits": {"max_tool_calls": MAX_CALLS, "on_tool_limit": "continue_text", "max_turns": MAX_CALLS + 1,
                   "max_new_tokens_per_turn": NEW_TOKENS, "max_total_new_tokens": NEW_TOKENS},
        "rollout": {"prompts_per_step": prompts, "samples_per_prompt": generations},
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
    start_calls, lengths = SlowCalculator.executed, []
    start = time.perf_counter()
    for step in range(2, steps + 2):
        metrics = trainer.run_step(step)
        trainer.sink.log_metrics(step, metrics)
        lengths.append(metrics[keys.RESPONSE_LENGTH])
    seconds = (time.perf_counter() - start) / steps
    return {"s_per_step": seconds, "tool_calls": SlowCalculator.executed - start_calls,
            "policy_tokens": statistics.mean(lengths)}  # fmt: skip


def run_trl(model_dir: Path, steps: int, out: Path, prompts: int, generations: int) -> dict:
    """TRL's GRPOTrainer with `tools=[calculator]`: one generation of the batch and one update a step."""
    from datasets import Dataset
    from transformers import AutoModelForCausalLM, PreTrainedTokenizerFast, TrainerCallback
    from trl import GRPOConfig, GRPOTrainer

    tokenizer = PreTrainedTokenizerFast.from_pretrained(str(model_dir))
    tokenizer.padding_side = "left"
    model = AutoModelForCausalLM.from_pretrained(str(model_dir))
    rows = problems(prompts * (steps + 1), seed=3)
    dataset = Dataset.from_dict({"prompt": [[{"role": "user", "content": r["question"]}] for r in rows]})

    def reward(completions, **kwargs):
        texts = [" ".join(m.get("content") or "" for m in c if m["role"] == "assistant") for c in completions]
        return [digit_fraction(text) for text in texts]

    marks: list[tuple[float, int]] = []  # (time, tool calls executed) at each step's start and the end

    class StepTimer(TrainerCallback):
        def on_step_begin(self, args, state, control, **kwargs):
            marks.append((time.perf_counter(), SlowCalculator.executed))

        def on_train_end(self, args, state, control, **kwargs):
            marks.append((time.perf_counter(), SlowCalculator.executed))

    args = GRPOConfig(
        output_dir=str(out / "trl"),
        per_device_train_batch_size=prompts * generations,
        num_generations=generations,
        steps_per_generation=1,
        gradient_accumulation_steps=1,
        max_completion_length=NEW_TOKENS,
        max_tool_calling_iterations=MAX_CALLS,
        beta=0.0,
        learning_rate=1e-4,
        max_steps=steps + 1,
        use_cpu=True,
        report_to="none",
        save_strategy="no",
        logging_steps=1,
        disable_tqdm=True,
        seed=0,
    )
    trainer = GRPOTrainer(
        model=model, reward_funcs=reward, args=args, train_dataset=dataset, processing_class=tokenizer,
        tools=[calculator], callbacks=[StepTimer()],
    )  # fmt: skip
    trainer.train()
    # policy tokens per completion (TRL's tool_mask 1), from the second step: the first is warm-up
    lengths = [e[LENGTH] for e in trainer.state.log_history if LENGTH in e]
    return {"s_per_step": (marks[-1][0] - marks[1][0]) / steps, "tool_calls": marks[-1][1] - marks[1][1],
            "policy_tokens": statistics.mean(lengths[1:])}  # fmt: skip


def peak_rss_mb() -> float:
    """This process's peak resident memory since its exec (VmHWM). Not ru_maxrss: Linux carries that over
    fork and exec, so a worker would report at least the parent's size when it forked (the SFT'd model)."""
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith("VmHWM:"):
            return int(line.split()[1]) / 1024  # kB
    raise RuntimeError("no VmHWM in /proc/self/status")


def worker(kind: str, model_dir: Path, steps: int, threads: int, prompts: int, generations: int) -> None:
    import torch

    torch.set_num_threads(threads)
    with tempfile.TemporaryDirectory() as tmp:
        run = run_ours if kind == "ours" else run_trl
        result = run(model_dir, steps, Path(tmp), prompts, generations)
    peak_mb = peak_rss_mb()
    completions = prompts * generations * steps
    result |= {"kind": kind, "completions_per_s": prompts * generations / result["s_per_step"],
               "tool_calls_per_completion": result["tool_calls"] / completions,
               "peak_mb": peak_mb}  # fmt: skip
    print(json.dumps(result))


def summarize(results: dict[str, list[dict]]) -> dict:
    summary: dict = {}
    for kind, runs in results.items():
        summary[kind] = {
            "completions_per_s": statistics.median(r["completions_per_s"] for r in runs),
            "s_per_step": statistics.median(r["s_per_step"] for r in runs),
            "peak_mb": max(r["peak_mb"] for r in runs),
            "tool_calls": sum(r["tool_calls"] for r in runs),
            "tool_calls_per_completion": statistics.mean(r["tool_calls_per_completion"] for r in runs),
            "policy_tokens_per_completion": statistics.mean(r["policy_tokens"] for r in runs),
        }
    summary["speedup"] = summary["ours"]["completions_per_s"] / summary["trl"]["completions_per_s"]
    # each round's pair ran back to back, so its ratio is the least affected by the machine's drift
    rounds = zip(results["ours"], results["trl"], strict=True)
    pairs = sorted(o["completions_per_s"] / t["completions_per_s"] for o, t in rounds)
    summary["speedup_per_round"] = {"min": pairs[0], "median": statistics.median(pairs), "max": pairs[-1]}
    return summary


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--steps", type=int, default=4, help="timed steps per run (after one warm-up)")
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--prompts", type=int, default=8)
    parser.add_argument("--generations", type=int, default=8)
    parser.add_argument("--sft-steps", type=int, default=200, help="SFT steps that warm the shared policy")
    parser.add_argument("--out", type=Path, help="also write every run and the summary here (JSON)")
    parser.add_argument("--worker", choices=["ours", "trl"])
    parser.add_argument("--model", type=Path)
    args = parser.parse_args()
    if args.worker:
        worker(args.worker, args.model, args.steps, args.threads, args.prompts, args.generations)
        return
    import torch

    torch.set_num_threads(args.threads)
    env = {**os.environ, "OMP_NUM_THREADS": str(args.threads), "TOKENIZERS_PARALLELISM": "false"}
    results: dict[str, list[dict]] = {"ours": [], "trl": []}
    with tempfile.TemporaryDirectory() as tmp:
        start = time.perf_counter()
        model_dir = build_policy(Path(tmp), args.sft_steps)
        check_same_prompt(model_dir)
        print(json.dumps({"sft_steps": args.sft_steps, "sft_s": time.perf_counter() - start}), flush=True)
        for _ in range(args.rounds):
            for kind in ("ours", "trl"):
                cmd = [sys.executable, __file__, "--worker", kind, "--model", str(model_dir),
                       "--steps", str(args.steps), "--threads", str(args.threads),
                       "--prompts", str(args.prompts), "--generations", str(args.generations)]  # fmt: skip
                proc = subprocess.run(cmd, capture_output=True, text=True, env=env)
                if proc.returncode:
                    raise RuntimeError(f"the {kind} worker failed:\n{proc.stderr[-4000:]}")
                results[kind].append(json.loads(proc.stdout.strip().splitlines()[-1]))
                print(json.dumps(results[kind][-1]), flush=True)
    summary = summarize(results)
    print(json.dumps(summary, indent=2))
    if args.out:
        args.out.write_text(json.dumps({"runs": results, "summary": summary}, indent=2), encoding="utf-8")
    idle = [kind for kind, runs in results.items() if not all(r["tool_calls"] for r in runs)]
    if idle:  # a side that never called its tool measured single-turn generation, not the tool loop
        sys.exit(f"no tool call executed in a run of: {', '.join(idle)}; the comparison is worthless")


if __name__ == "__main__":
    main()
