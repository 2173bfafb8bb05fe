"""The device check: what our GPU paths measure on one machine, as one markdown table.

    python -m tests.gpu.check [--cpu] [--out FILE]      (tests/gpu/check.sh wraps it)

On a GPU it builds a 0.5B-shaped random Qwen2 offline (hidden 896, 24 layers, 14 heads, 2 KV heads,
intermediate 4864; the vocabulary is the tiny tokenizer's 400 tokens, not Qwen2.5's 151,936, so the
embedding and LM head are ~1/380 of the real ones: about 358M parameters instead of 494M) and measures:
  generation   our HF backend (fast decoder, plain model calls) against `model.generate` and vLLM (when
               installed), tokens/s, batch 64 x 256 new tokens, bf16;
  logprobs     the same weights in bf16 against fp32: |log p| gap on the tokens of random sequences;
  grpo         3 GRPO steps of the single-process engine, DeepSpeed ZeRO-2 and ZeRO-3 (one rank per GPU):
               s/step (steps after the first) and each process's peak CUDA memory;
  demo         the calculator demo's recipe (SFT, then GRPO with the tool) on the device: wall time,
               tool-call rate and accuracy on the held-out problems after RL.
`--cpu` runs every row on the CPU with tiny shapes and a few tokens and steps (CI runs it so the script
cannot rot); the numbers then say nothing about a GPU. Each section is guarded: a failing one puts its
error in the table and the others still run; the exit status is 1 when any section failed.
"""

from __future__ import annotations

import argparse
import copy
import datetime
import importlib.util
import json
import os
import platform
import re
import signal
import statistics
import subprocess
import sys
import tempfile
import time
import traceback
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import torch

from tests.benchmarks.bench_generation import bench_backend, bench_generate
from trainers.backends.hf import HFBackend

ROOT = Path(__file__).resolve().parents[2]

RANK_MAIN = Path(__file__).with_name("train_rank.py")
RUN_TIMEOUT_S = 300  # one engine's run: about a minute on a GPU, half a minute in --cpu mode
EXCEPTION = re.compile(r"^(\[rank\d+\]: )?[\w.]*(Error|Exception|Interrupt)\b[^ ]*:? ")


@dataclass(frozen=True)
class Profile:
    """The shapes and sizes of one mode of the check."""

    device: str
    dtype: torch.dtype  # generation's
    hidden: int
    layers: int
    heads: int
    kv_heads: int
    intermediate: int
    gen_batch: int
    gen_tokens: int
    gen_repeats: int
    logprob_rows: int
    logprob_len: int
    grpo_steps: int
    grpo_prompts: int
    grpo_samples: int
    grpo_tokens: int
    demo: dict  # DemoSettings overrides


GPU = Profile(
    device="cuda", dtype=torch.bfloat16, hidden=896, layers=24, heads=14, kv_heads=2, intermediate=4864,
    gen_batch=64, gen_tokens=256, gen_repeats=3, logprob_rows=16, logprob_len=512,
    grpo_steps=3, grpo_prompts=8, grpo_samples=8, grpo_tokens=128, demo={},
)  # fmt: skip
CPU = Profile(
    device="cpu", dtype=torch.float32, hidden=64, layers=2, heads=4, kv_heads=2, intermediate=128,
    gen_batch=4, gen_tokens=8, gen_repeats=1, logprob_rows=2, logprob_len=32,
    grpo_steps=2, grpo_prompts=2, grpo_samples=2, grpo_tokens=8,
    demo={"n_train": 32, "n_eval": 8, "n_val": 8, "num_layers": 1, "sft_tool_steps": 2, "sft_steps": 2,
          "sft_batch": 4, "rl_steps": 1, "prompts_per_step": 2, "samples_per_prompt": 2, "eval_every": 0},
)  # fmt: skip

Row = tuple[str, str, str, str]  # section, measure, value, note


def fmt(value: float, digits: int = 3) -> str:
    return f"{value:.{digits}g}" if abs(value) < 1000 else f"{value:,.0f}"


def sync(device: str) -> None:
    """Wait for queued kernels, so a wall-clock time covers the work (no-op on the CPU)."""
    if device.startswith("cuda"):
        torch.cuda.synchronize()


class Bench:
    """The check's scratch directory, profile and the random 0.5B-shaped model (built once)."""

    def __init__(self, profile: Profile, work: Path) -> None:
        self.profile, self.work = profile, work
        self._model_dir: Path | None = None

    def model_dir(self) -> Path:
        """A saved random Qwen2 of the profile's shape (fp32) with the tiny tokenizer."""
        if self._model_dir is None:
            from transformers import Qwen2Config, Qwen2ForCausalLM

            from trainers.models.tiny import build_tokenizer

            p, out = self.profile, self.work / "model"
            tokenizer = build_tokenizer()
            config = Qwen2Config(
                vocab_size=len(tokenizer), hidden_size=p.hidden, intermediate_size=p.intermediate,
                num_hidden_layers=p.layers, num_attention_heads=p.heads, num_key_value_heads=p.kv_heads,
                max_position_embeddings=2048, tie_word_embeddings=True, eos_token_id=tokenizer.eos_token_id,
                pad_token_id=tokenizer.pad_token_id, bos_token_id=None,
            )  # fmt: skip
            torch.manual_seed(0)
            with torch.device(p.device):  # initialised where it runs: seconds instead of a minute on a CPU
                model = Qwen2ForCausalLM(config)
            model.generation_config.eos_token_id = tokenizer.eos_token_id
            model.generation_config.pad_token_id = tokenizer.pad_token_id
            model.save_pretrained(out)
            tokenizer.save_pretrained(out)
            self._model_dir = out
        return self._model_dir

    def load(self, dtype: torch.dtype) -> tuple[torch.nn.Module, object]:
        from trainers.models.model_io import load_policy

        model, tokenizer = load_policy(self.model_dir(), dtype=dtype)
        return model.to(self.profile.device).eval(), tokenizer

    def prompts(self, tokenizer: object, count: int) -> list[list[int]]:
        texts = [f"Question {i}: what is {37 * i % 1000} * {91 * i % 1000}?" * (1 + i % 3)
                 for i in range(count)]  # fmt: skip
        return [tokenizer.encode(t, add_special_tokens=False) for t in texts]


# --- sections -------------------------------------------------------------------------------------


def model_section(bench: Bench) -> list[Row]:
    from transformers import AutoConfig, Qwen2ForCausalLM

    config = AutoConfig.from_pretrained(bench.model_dir())
    with torch.device("meta"):  # shapes only
        params = sum(p.numel() for p in Qwen2ForCausalLM(config).parameters())
    shape = (f"hidden {config.hidden_size}, {config.num_hidden_layers} layers, {config.num_attention_heads} "
             f"heads, {config.num_key_value_heads} KV heads, intermediate {config.intermediate_size}, "
             f"vocab {config.vocab_size} (the tiny tokenizer's; Qwen2.5: 151,936), random")  # fmt: skip
    return [("model", "parameters (M)", fmt(params / 1e6), shape)]


def generation_section(bench: Bench) -> list[Row]:
    p = bench.profile
    model, tokenizer = bench.load(p.dtype)
    fast = HFBackend(model, tokenizer)
    plain = HFBackend(model, tokenizer, fast_decode=False)
    prompts = bench.prompts(tokenizer, p.gen_batch)
    limits = [p.gen_tokens] * p.gen_batch
    paths: dict[str, Callable[[int], tuple[float, int]]] = {
        "HF backend, fast decoder": lambda seed: bench_backend(fast, prompts, limits, seed),
        "HF backend, model calls": lambda seed: bench_backend(plain, prompts, limits, seed),
        "model.generate": lambda seed: bench_generate(fast, prompts, limits, seed),
    }
    for run in paths.values():  # warm-up: kernels, allocator
        run(0)
    rates: dict[str, list[float]] = {name: [] for name in paths}
    for seed in range(1, p.gen_repeats + 1):  # interleaved, so load changes hit every path alike
        for name, run in paths.items():
            sync(p.device)
            seconds, tokens = run(seed)
            rates[name].append(tokens / seconds)
    dtype = str(p.dtype).removeprefix("torch.")
    note = f"batch {p.gen_batch} x {p.gen_tokens} new tokens, {dtype}, best of {p.gen_repeats}"
    rows = [("generation", f"{name} tok/s", fmt(max(r)), note) for name, r in rates.items()]
    pairs = zip(rates["HF backend, fast decoder"], rates["model.generate"], strict=True)
    ratio = statistics.median(f / g for f, g in pairs)
    rows.append(("generation", "fast decoder / model.generate", f"{ratio:.2f}x", "median of the paired runs"))
    return rows


def vllm_section(bench: Bench) -> list[Row]:
    if importlib.util.find_spec("vllm") is None:
        return [("generation", "vLLM tok/s", "skipped: vllm not installed", "")]
    p = bench.profile
    if not p.device.startswith("cuda"):
        return [("generation", "vLLM tok/s", "skipped: vllm runs on CUDA (--cpu)", "")]
    from trainers.backends.vllm import VLLMBackend, VLLMOptions, build_llm
    from trainers.models.loading import load_tokenizer

    options = VLLMOptions(gpu_memory_utilization=0.3, dtype="bfloat16", sleep=False)
    tokenizer = load_tokenizer(bench.model_dir())
    backend = VLLMBackend(build_llm(bench.model_dir(), options), tokenizer, options=options)
    prompts = bench.prompts(tokenizer, p.gen_batch)
    limits = [p.gen_tokens] * p.gen_batch
    bench_backend(backend, prompts, limits, 0)  # warm-up
    runs = [bench_backend(backend, prompts, limits, seed) for seed in range(1, p.gen_repeats + 1)]
    rate = max(tokens / seconds for seconds, tokens in runs)
    note = f"batch {p.gen_batch} x {p.gen_tokens} new tokens, bfloat16, best of {p.gen_repeats}"
    return [("generation", "vLLM tok/s", fmt(rate), note)]


@torch.no_grad()
def logprob_section(bench: Bench) -> list[Row]:
    """The log-prob of each next token of random sequences, bf16 weights and activations against fp32."""
    p = bench.profile
    model, _ = bench.load(torch.float32)
    generator = torch.Generator().manual_seed(0)
    ids = torch.randint(0, model.config.vocab_size, (p.logprob_rows, p.logprob_len), generator=generator)
    ids = ids.to(p.device)

    def logprobs(m: torch.nn.Module) -> torch.Tensor:
        logits = m(input_ids=ids).logits[:, :-1].float()
        return torch.log_softmax(logits, dim=-1).gather(-1, ids[:, 1:, None]).squeeze(-1)

    full = logprobs(model)
    half = logprobs(copy.deepcopy(model).to(torch.bfloat16))
    gap, mean = (half - full).abs(), float(full.mean())
    note = f"{p.logprob_rows} x {p.logprob_len} random tokens, same weights"
    return [
        ("logprobs", "bf16 vs fp32 mean abs gap", fmt(float(gap.mean())), note),
        ("logprobs", "bf16 vs fp32 max abs gap", fmt(float(gap.max())), f"fp32 mean log p {fmt(mean)}"),
    ]


def grpo_config(bench: Bench, out: Path, engine: str, stage: int, ranks: int) -> Path:
    """The GRPO run each engine trains (the DeepSpeed tests' reward, so advantages are not zero)."""
    from trainers.demo.arithmetic import make_splits, write_rows

    p = bench.profile
    train, _ = make_splits(p.grpo_prompts * p.grpo_steps * 2, 2, seed=0)
    from tests.gpu.train_rank import register_reward

    cuda = p.device.startswith("cuda")
    config = {
        "seed": 3,
        "output_dir": str(out),
        "model": {"path": str(bench.model_dir()), "device": p.device},
        "tools": [{"name": "calculator"}],
        "limits": {
            "max_turns": 1,
            "max_new_tokens_per_turn": p.grpo_tokens,
            "max_total_new_tokens": p.grpo_tokens,
        },  # fmt: skip
        "rollout": {"prompts_per_step": p.grpo_prompts, "samples_per_prompt": p.grpo_samples},
        "reward": {"components": [{"name": register_reward()}]},
        "optimizer": {"lr": 1e-5},
        "training": {"steps": p.grpo_steps, "engine": engine, "deepspeed": {"ranks": ranks, "stage": stage}},
        "checkpoint": {"every_steps": 1000, "keep": 1},
        "data": {"train_path": str(write_rows(train, out.parent / f"{out.name}-train.jsonl"))},
        "resources": {"gpus": (ranks if engine == "deepspeed" else 1) if cuda else 0},  # one rank per GPU
    }
    path = out.parent / f"{out.name}.json"
    path.write_text(json.dumps(config), encoding="utf-8")
    return path


def grpo_run(bench: Bench, name: str, engine: str, stage: int = 2) -> Row:
    """One engine's run in child processes (as a user runs it): s/step and the largest rank's peak memory."""
    from trainers.training.sinks import read_jsonl

    p = bench.profile
    ranks = max(1, torch.cuda.device_count()) if p.device.startswith("cuda") else 2
    out = bench.work / f"grpo-{name}"
    memory = bench.work / f"memory-{name}"
    memory.mkdir(parents=True)
    config = grpo_config(bench, out, engine, stage, ranks)
    command = [sys.executable, str(RANK_MAIN), "train", str(config)]
    if engine == "deepspeed":
        launcher = ["-m", "torch.distributed.run", "--standalone", f"--nproc_per_node={ranks}"]
        command[1:2] = [*launcher, str(RANK_MAIN)]
    env = {**os.environ, "GPU_CHECK_MEMORY_DIR": str(memory), "PYTHONPATH": str(ROOT)}
    code, output = run_group(command, env)
    if code != 0:
        raise RuntimeError(f"exit {code}: {last_error(output)}")
    steps = [m["time/step"] for m in read_jsonl(out / "metrics.jsonl")]
    timed = steps[1:] or steps  # the first step pays for kernels and allocator warm-up
    peaks = [json.loads(f.read_text()) for f in sorted(memory.glob("rank*.json"))]
    peak = max(peaks, key=lambda m: m["mib"])
    label = {"local": "single-process engine"}.get(engine, f"DeepSpeed ZeRO-{stage}, {ranks} rank(s)")
    value = f"{fmt(statistics.mean(timed))} s/step, {fmt(peak['mib'])} MiB"
    note = (f"{p.grpo_steps} steps of {p.grpo_prompts} x {p.grpo_samples} x {p.grpo_tokens} tokens; "
            f"s/step over steps 2.., memory: {peak['kind']} of the largest process")  # fmt: skip
    return ("grpo", label, value, note)


def run_group(command: list[str], env: dict[str, str]) -> tuple[int, str]:
    """Run `command` in its own process group; past RUN_TIMEOUT_S it is stopped (SIGTERM, which torchrun
    passes to its ranks, then SIGKILL), so a hung collective cannot hold the machine or outlive the check."""
    child = subprocess.Popen(
        command, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, start_new_session=True
    )
    try:
        output, _ = child.communicate(timeout=RUN_TIMEOUT_S)
    except subprocess.TimeoutExpired:
        child.terminate()  # torchrun passes SIGTERM on to its ranks (each in a session of its own)
        try:
            output, _ = child.communicate(timeout=60)
        except subprocess.TimeoutExpired:
            os.killpg(child.pid, signal.SIGKILL)
            output, _ = child.communicate()
        raise RuntimeError(f"no result after {RUN_TIMEOUT_S} s: {last_error(output)}") from None
    return child.returncode, output


def last_error(text: str) -> str:
    """The child's last exception (a rank's, not torchrun's summary) with its indented detail lines."""
    lines = text.splitlines()
    found = [i for i, line in enumerate(lines)
             if EXCEPTION.match(line) and "ChildFailedError" not in line]  # fmt: skip
    if not found:
        return (([line.strip() for line in lines if line.strip()] or ["no output"])[-1])[:300]
    start, detail = found[-1], []
    for line in lines[found[-1] + 1 : found[-1] + 4]:
        if not line.startswith(" "):
            break
        detail.append(line.strip())
    return " ".join([lines[start].strip(), *detail])[:300]


def demo_section(bench: Bench) -> list[Row]:
    """The calculator demo's recipe (trainers.demo.recipe.run_demo), the policy on the profile's device."""
    from trainers.config.loader import validate_config
    from trainers.demo.arithmetic import make_splits, write_rows
    from trainers.demo.experts import make_experts, write_experts
    from trainers.demo.model import build_demo_model
    from trainers.demo.recipe import held_out_eval, rl_config
    from trainers.demo.settings import DemoSettings
    from trainers.models.model_io import load_policy
    from trainers.templates import TEMPLATES
    from trainers.tools.toolset import Toolset
    from trainers.training.run import run_config
    from trainers.training.sft import render_experts, sft_train

    p, out = bench.profile, bench.work / "demo"
    settings = DemoSettings(**p.demo)
    start = time.perf_counter()
    out.mkdir(parents=True)
    train, held_out = make_splits(settings.n_train + settings.n_val, settings.n_eval, seed=12345)
    train, val = train[: settings.n_train], train[settings.n_train :]
    data = {name: write_rows(rows, out / f"{name}.jsonl") for name, rows in (("train", train), ("val", val))}
    records = make_experts(train, tool_fraction=settings.tool_fraction, seed=settings.seed)
    write_experts(records, out / "experts.jsonl")
    template, tools = TEMPLATES.get("qwen_tool")(), Toolset.build(["calculator"]).specs()
    base = build_demo_model(out / "base", records, template=template, tools=tools, seed=settings.seed,
                            num_layers=settings.num_layers)  # fmt: skip
    model, tokenizer = load_policy(base)
    model.to(p.device)
    examples = render_experts(records, template=template, tokenizer=tokenizer, tools=tools)
    with_tool = [e for e, r in zip(examples, records, strict=True) if r["uses_tool"]]
    for phase, steps in ((with_tool, settings.sft_tool_steps), (examples, settings.sft_steps)):
        sft_train(
            model,
            phase,
            pad_token_id=tokenizer.pad_token_id,
            steps=steps,
            batch_size=settings.sft_batch,
            lr=settings.sft_lr,
            decay=False,
            seed=settings.seed,
        )
    model.save_pretrained(out / "sft")
    tokenizer.save_pretrained(out / "sft")
    config = rl_config(settings, out, out / "sft", data)
    fields = config.model_dump(mode="json")  # on the device, validated as a user's config is
    fields["model"]["device"] = p.device
    fields["resources"]["gpus"] = 1 if p.device.startswith("cuda") else 0
    config = validate_config(fields)
    result = run_config(config, model=model, tokenizer=tokenizer)
    if result.best:  # as run_demo: the best validation step's weights
        from trainers.training.checkpoint import load_model_weights

        load_model_weights(model, Path(config.output_dir) / "checkpoints" / "best")
    after = held_out_eval(model, tokenizer, [q.row() for q in held_out], settings)
    wall = time.perf_counter() - start
    note = (f"SFT {settings.sft_tool_steps}+{settings.sft_steps} steps, RL {result.steps_done} steps, "
            f"{settings.n_eval} held-out problems at T=1")  # fmt: skip
    return [
        ("demo", "wall time (s)", fmt(wall), note),
        ("demo", "tool-call rate after RL", fmt(after["sampled/tool_call_rate"]), ""),
        ("demo", "accuracy after RL", fmt(after["sampled/accuracy"]), ""),
    ]


SECTIONS: list[tuple[str, Callable[[Bench], list[Row]]]] = [
    ("model", model_section),
    ("generation", generation_section),
    ("generation vLLM", vllm_section),
    ("logprobs", logprob_section),
    ("grpo single-process", lambda bench: [grpo_run(bench, "local", "local")]),
    ("grpo ZeRO-2", lambda bench: [grpo_run(bench, "zero2", "deepspeed", 2)]),
    ("grpo ZeRO-3", lambda bench: [grpo_run(bench, "zero3", "deepspeed", 3)]),
    ("demo", demo_section),
]


def environment(profile: Profile) -> str:
    versions = [f"torch {torch.__version__}"]
    for name in ("transformers", "deepspeed", "vllm"):
        if importlib.util.find_spec(name) is not None:
            module = __import__(name)
            versions.append(f"{name} {getattr(module, '__version__', '?')}")
    if profile.device.startswith("cuda"):
        device = f"{torch.cuda.device_count()} x {torch.cuda.get_device_name(0)}"
    else:
        device = f"CPU ({platform.machine()}, --cpu dry mode)"
    stamp = datetime.datetime.now(datetime.UTC).strftime("%Y-%m-%d %H:%M UTC")
    return f"Device check, {stamp}: {device}; {', '.join(versions)}"


def run_checks(profile: Profile, work: Path) -> tuple[str, bool]:
    """Every section in order; the markdown table and whether all of them passed."""
    bench = Bench(profile, work)
    rows: list[Row] = []
    ok = True
    for section, check in SECTIONS:
        start = time.perf_counter()
        try:
            rows += check(bench)
        except Exception as error:  # one failing section must not hide the others' numbers
            traceback.print_exc()
            message = f"error: {type(error).__name__}: {error}"[:400]
            rows.append((section.split()[0], f"{section}: FAILED", message, ""))
            ok = False
        print(f"[check] {section}: {time.perf_counter() - start:.1f} s", file=sys.stderr, flush=True)
        if profile.device.startswith("cuda"):
            torch.cuda.empty_cache()
    lines = [environment(profile), "", "| section | measure | value | notes |", "|---|---|---|---|"]
    for row in rows:
        lines.append("| " + " | ".join(cell.replace("|", "/").replace("\n", " ") for cell in row) + " |")
    return "\n".join(lines) + "\n", ok


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--cpu", action="store_true", help="dry mode: tiny shapes on the CPU (CI)")
    parser.add_argument(
        "--out",
        type=Path,
        default=None,
        help="also write the table here (default: $OUT/gpu-check.md when OUT is set)",
    )
    args = parser.parse_args(argv)
    if not args.cpu and not torch.cuda.is_available():
        parser.error("no CUDA device: run with --cpu for the dry mode")
    profile = CPU if args.cpu else GPU
    with tempfile.TemporaryDirectory(prefix="gpu-check-") as work:
        table, ok = run_checks(profile, Path(work))
    print(table)
    out = args.out or (Path(os.environ["OUT"]) / "gpu-check.md" if os.environ.get("OUT") else None)
    if out is not None:
        out.parent.mkdir(parents=True, exist_ok=True)
        out.write_text(table, encoding="utf-8")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
