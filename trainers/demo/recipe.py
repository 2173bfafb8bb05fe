"""The demo recipe: a tiny model learns to use a calculator, SFT on mixed experts, then GRPO with tools.

Measured on 200 held-out problems at temperature 1 (tool-call rate, accuracy) and greedily, before
and after RL. The RL run is an ordinary `RunConfig` run of the training loop.
"""

from __future__ import annotations

import json
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

import torch

from trainers.config.loader import validate_config
from trainers.demo.arithmetic import make_splits, write_rows
from trainers.demo.experts import make_experts, write_experts
from trainers.demo.model import build_demo_model
from trainers.demo.progress import Progress, evaluation_numbers, rl_sink
from trainers.demo.settings import DemoSettings
from trainers.metrics import keys
from trainers.models.model_io import load_policy
from trainers.templates import TEMPLATES
from trainers.tools.toolset import Toolset
from trainers.training.checkpoint import load_model_weights
from trainers.training.evaluate import Evaluator, correctness_judge
from trainers.training.run import run_config
from trainers.training.sft import render_experts, sft_train

LIMITS = {"max_tool_calls": 2, "max_turns": 3, "max_new_tokens_per_turn": 40, "max_total_new_tokens": 80}


@dataclass
class DemoReport:
    settings: dict[str, Any]
    before: dict[str, float]
    after: dict[str, float]
    sft_seconds: float
    rl_seconds: float
    sft_steps: int
    rl_steps: int
    best_step: int | None = None
    notes: list[str] = field(default_factory=list)

    def table(self) -> str:
        rows = [("tool-call rate (T=1)", "sampled/tool_call_rate"), ("accuracy (T=1)", "sampled/accuracy"),
                ("greedy accuracy", "greedy/accuracy"), ("greedy tool-call rate", "greedy/tool_call_rate"),
                ("tool calls per solved (T=1)", "sampled/tool_calls_per_solved")]  # fmt: skip
        lines = [f"{'metric':<30}{'after SFT':>12}{'after RL':>12}{'change':>10}"]
        for label, key in rows:
            b, a = self.before.get(key, float("nan")), self.after.get(key, float("nan"))
            lines.append(f"{label:<30}{b:>12.3f}{a:>12.3f}{a - b:>+10.3f}")
        lines.append(f"wall time: SFT {self.sft_seconds:.0f} s + RL {self.rl_seconds:.0f} s "
                     f"= {self.sft_seconds + self.rl_seconds:.0f} s")  # fmt: skip
        return "\n".join(lines)


CORRECTNESS = {"components": [{"name": "correctness", "params": {"mode": "numeric"}}]}


def rl_config(
    settings: DemoSettings, out: Path, model_dir: Path, data: dict[str, Path], reward: dict | None = None
) -> Any:
    """GRPO with tool-integrated rollouts and (by default) a plain correctness reward."""
    return validate_config({
        "name": f"demo-seed{settings.seed}",
        "seed": settings.seed,
        "output_dir": str(out / "rl"),
        "model": {"path": str(model_dir)},
        "template": {"name": "qwen_tool"},
        "tools": [{"name": "calculator"}],
        "limits": LIMITS,
        "sampling": {"temperature": 1.0},
        "rollout": {"prompts_per_step": settings.prompts_per_step,
                    "samples_per_prompt": settings.samples_per_prompt},
        "reward": reward or CORRECTNESS,
        "algorithm": {"estimator": "grpo"},
        "loss": {"kl": "k3" if settings.kl_coef else "none", "kl_coef": settings.kl_coef},
        "optimizer": {"lr": settings.rl_lr, "warmup_steps": 2},
        "training": {"steps": settings.rl_steps},
        # RL at a fixed lr can erode copying late: validate from the start, keep the best.
        "evaluation": {"every_steps": settings.eval_every, "pass_k": 1, "greedy": False,
                       "at_start": bool(settings.eval_every)},
        "checkpoint": {"every_steps": max(1, settings.rl_steps), "keep": 1,
                       "keep_best": "sampled/accuracy" if settings.eval_every else None},
        "data": {"train_path": str(data["train"]), "eval_path": str(data["val"])},
    })  # fmt: skip


def held_out_eval(
    model: Any, tokenizer: Any, rows: list[dict], settings: DemoSettings, progress: Progress | None = None,
    name: str = "evaluation",
) -> dict[str, float]:  # fmt: skip
    from trainers.backends.hf import HFBackend
    from trainers.config.limits import RolloutLimits
    from trainers.rollout.engine import RolloutEngine

    engine = RolloutEngine(HFBackend(model, tokenizer), "qwen_tool", ["calculator"], RolloutLimits(**LIMITS))
    evaluator = Evaluator(engine, rows, correctness_judge("numeric"), samples=settings.eval_samples)
    with (progress or Progress(enabled=False)).phase(name, evaluator.mode_count) as phase:
        evaluator.on_mode = lambda mode, metrics: phase.advance(**evaluation_numbers(mode, metrics))
        return evaluator.run(seed=10_000 + settings.seed)


@dataclass
class DemoSFT:
    """The demo's policy after SFT (also saved in out/sft), its data files and held-out problems."""

    model: Any
    tokenizer: Any
    data: dict[str, Path]
    held_out: list[Any]
    seconds: float
    steps: int


def demo_sft(settings: DemoSettings, out: Path, progress: Progress | None = None) -> DemoSFT:
    """Data, experts and the tiny model, then the two SFT phases (tool-only, then the whole mix)."""
    out.mkdir(parents=True, exist_ok=True)
    # The problems are the same for every seed; the seed changes the model, its SFT and RL.
    train, held_out = make_splits(settings.n_train + settings.n_val, settings.n_eval, seed=12345)
    train, val = train[: settings.n_train], train[settings.n_train :]
    data = {name: write_rows(rows, out / f"{name}.jsonl") for name, rows in
            (("train", train), ("val", val), ("eval", held_out))}  # fmt: skip
    records = make_experts(train, tool_fraction=settings.tool_fraction, seed=settings.seed)
    write_experts(records, out / "experts.jsonl")
    template = TEMPLATES.get("qwen_tool")()
    tools = Toolset.build(["calculator"]).specs()
    base = build_demo_model(out / "base", records, template=template, tools=tools, seed=settings.seed,
                            num_layers=settings.num_layers)  # fmt: skip
    model, tokenizer = load_policy(base)
    examples = render_experts(records, template=template, tokenizer=tokenizer, tools=tools)
    with_tool = [e for e, r in zip(examples, records, strict=True) if r["uses_tool"]]
    seconds, steps_done = 0.0, 0
    total = settings.sft_tool_steps + settings.sft_steps
    with (progress or Progress(enabled=False)).phase("SFT", total) as bar:
        for part, steps in ((with_tool, settings.sft_tool_steps), (examples, settings.sft_steps)):
            sft = sft_train(
                model, part, pad_token_id=tokenizer.pad_token_id, steps=steps, batch_size=settings.sft_batch,
                lr=settings.sft_lr, decay=False, max_seconds=settings.sft_seconds, seed=settings.seed,
                on_step=lambda _, metrics: bar.advance(loss=metrics[keys.SFT_LOSS]),
            )  # fmt: skip
            seconds, steps_done = seconds + sft.seconds, steps_done + sft.steps
    model.save_pretrained(out / "sft")
    tokenizer.save_pretrained(out / "sft")
    return DemoSFT(model, tokenizer, data, held_out, seconds, steps_done)


def run_demo(settings: DemoSettings, out_dir: str | Path, progress: Progress | None = None) -> DemoReport:
    """Build data and model, SFT, evaluate, GRPO, evaluate again on the held-out set; writes report.json.
    `progress` shows each phase (by default nothing is shown)."""
    progress = progress or Progress(enabled=False)
    if settings.threads:
        torch.set_num_threads(settings.threads)
    out = Path(out_dir)
    sft = demo_sft(settings, out, progress)
    model, tokenizer = sft.model, sft.tokenizer
    rows = [p.row() for p in sft.held_out]
    before = held_out_eval(model, tokenizer, rows, settings, progress, "evaluation after SFT")
    start = time.perf_counter()
    config = rl_config(settings, out, out / "sft", sft.data)
    with progress.phase("RL", settings.rl_steps) as phase:
        sink = rl_sink(Path(config.output_dir), phase)
        result = run_config(config, model=model, tokenizer=tokenizer, sink=sink)
    best_step = None
    if result.best:  # RL at a fixed lr can erode copying late: keep the best validation step
        best_step = int(result.best["step"])
        load_model_weights(model, Path(config.output_dir) / "checkpoints" / "best")
    rl_seconds = time.perf_counter() - start
    after = held_out_eval(model, tokenizer, rows, settings, progress, "evaluation after RL")
    report = DemoReport(
        asdict(settings), before, after, sft.seconds, rl_seconds, sft.steps, result.steps_done, best_step
    )
    (out / "report.json").write_text(json.dumps(asdict(report), indent=2), encoding="utf-8")
    return report
