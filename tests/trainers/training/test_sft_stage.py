"""The run config's SFT stage: progress streamed to the run's sink step by step before RL begins, cancel
during SFT, the prompt rendered from the run's own template source, and the tiny model's tokenizer
trained on the run's SFT conversations."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.trainers.sft_configs import TINY, tiny_sft_config
from trainers.config.loader import ConfigError, validate_config
from trainers.demo.arithmetic import make_splits, write_rows
from trainers.demo.catalog import expert_conversations
from trainers.metrics import keys
from trainers.models.loading import load_tokenizer
from trainers.templates import TEMPLATES
from trainers.tools.toolset import Toolset
from trainers.training.build import resolve_model_path
from trainers.training.run import run_config
from trainers.training.sft import render_expert
from trainers.training.sinks import MultiSink, Phase, RunDirSink, Sink, read_jsonl


def sft_config(tmp_path: Path, **overrides) -> dict:
    sft = {"batch_size": 8, "epochs": 2}
    return tiny_sft_config(tmp_path, expert_conversations(24), sft=sft, steps=2, **overrides)


class Order(Sink):
    """Records which kind of record arrived, in order, and stops the run on request; with `phases`, the
    phases the run reported too."""

    def __init__(self, phases: bool = False) -> None:
        self.calls: list[tuple[str, int | str]] = []
        self.phases = phases

    def log_phase(self, phase):
        if self.phases:
            self.calls.append(("phase", phase))

    def log_sft(self, step, metrics):
        self.calls.append(("sft", step))

    def log_metrics(self, step, metrics):
        self.calls.append(("metrics", step))

    def log_trajectories(self, step, trajectories): ...

    def log_eval(self, step, results):
        if self.phases:
            self.calls.append(("eval", step))

    def log_checkpoint(self, step, path):
        if self.phases:
            self.calls.append(("checkpoint", step))

    def log_alerts(self, alerts): ...

    def close(self): ...


def test_sft_progress_streams_to_the_sink_before_rl(tmp_path):
    config = validate_config(sft_config(tmp_path))
    order = Order()
    result = run_config(config, sink=MultiSink([RunDirSink(config.output_dir), order]))
    assert result.sft is not None and result.sft.steps == 6  # 2 epochs x ceil(24 / 8)
    assert order.calls == [("sft", s) for s in range(1, 7)] + [("metrics", 1), ("metrics", 2)]
    rows = read_jsonl(Path(config.output_dir) / "sft.jsonl")
    assert [row["step"] for row in rows] == [1, 2, 3, 4, 5, 6]
    assert [row[keys.SFT_PROGRESS] for row in rows] == pytest.approx([s / 6 for s in range(1, 7)], rel=1e-9)
    assert all(row[keys.SFT_LOSS] > 0 and row[keys.SFT_LR] > 0 for row in rows)
    metrics = read_jsonl(Path(config.output_dir) / "metrics.jsonl")  # the RL series stay their own
    assert [row["step"] for row in metrics] == [1, 2] and all(keys.SFT_LOSS not in row for row in metrics)


def test_the_run_tells_its_sink_what_runs_between_steps(tmp_path):
    """Between the records a dashboard sees (the last SFT step, the first RL step) the run says what it is
    doing: loading, SFT, starting RL (building the trainer), evaluating, saving a checkpoint, training."""
    train, held_out = make_splits(8, 2, seed=1)
    config = sft_config(
        tmp_path,
        evaluation={"at_start": True, "greedy": False},
        checkpoint={"every_steps": 1},
        data={"train_path": str(write_rows(train, tmp_path / "t.jsonl")),
              "eval_path": str(write_rows(held_out, tmp_path / "e.jsonl"))},
    )  # fmt: skip
    order = Order(phases=True)
    run_config(validate_config(config), sink=order)
    saved = lambda step: [("phase", Phase.SAVING), ("checkpoint", step), ("phase", Phase.TRAINING)]  # noqa: E731
    assert order.calls == [
        ("phase", Phase.LOADING),
        ("phase", Phase.SFT),
        *[("sft", s) for s in range(1, 7)],
        ("phase", Phase.STARTING_RL),
        ("phase", Phase.EVALUATING), ("eval", 0), ("phase", Phase.TRAINING),
        ("metrics", 1), *saved(1),
        ("metrics", 2), *saved(2),
        ("phase", Phase.EVALUATING), ("eval", 2), ("phase", Phase.TRAINING),
    ]  # fmt: skip


def test_a_stop_during_sft_ends_sft_and_the_run(tmp_path):
    config = validate_config(sft_config(tmp_path))
    order = Order()
    result = run_config(config, sink=order, should_stop=lambda: len(order.calls) >= 2)
    assert result.sft.steps == 2 and result.stopped and result.steps_done == 0
    assert order.calls == [("sft", 1), ("sft", 2)]


def test_tiny_tokenizer_trained_on_sft_data_makes_the_prompt_short(tmp_path):
    fitted = load_tokenizer(resolve_model_path(validate_config(sft_config(tmp_path / "a"))))
    default = sft_config(tmp_path / "b")
    default["model"] = {"path": "tiny", "tiny": {**TINY, "tokenizer_corpus": "default"}}
    generic = load_tokenizer(resolve_model_path(validate_config(default)))
    tools = Toolset.build(["calculator"]).specs()
    prompt = TEMPLATES.get("qwen_tool")().render_prompt(question="What is 12 * 34?", tools=tools)
    short, long = len(fitted.encode(prompt)), len(generic.encode(prompt))
    assert short * 4 < long, (short, long)  # the system prompt is a few merged tokens
    assert fitted.decode(fitted.encode(prompt)) == prompt


def test_tokenizer_corpus_from_sft_data_needs_an_sft_section(tmp_path):
    config = sft_config(tmp_path)
    del config["sft"]
    with pytest.raises(ConfigError, match="sft"):
        validate_config(config)


def test_experts_are_rendered_with_the_runs_own_prompt_source(tmp_path):
    """An edited template (a pinned prompt version's source) must give SFT the prompt rollouts see."""
    config = validate_config(sft_config(tmp_path))
    tokenizer = load_tokenizer(resolve_model_path(config))
    template, tools = TEMPLATES.get("qwen_tool")(), Toolset.build(["calculator"]).specs()
    messages = expert_conversations(1)[0]["messages"]
    source = "<|im_start|>user\nSolve: {{ question }}<|im_end|>\n<|im_start|>assistant\n"
    expert = render_expert(
        messages, template=template, tokenizer=tokenizer, tools=tools, prompt_source=source
    )
    rollout_prompt = template.render_prompt(question=messages[0]["content"], tools=tools, source=source)
    assert expert.turns[0].text == rollout_prompt and "Solve: What is" in rollout_prompt
