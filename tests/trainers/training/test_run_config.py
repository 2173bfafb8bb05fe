"""`run_config`, the one way to train a config: the CLI goes through it, and it honours
`model.tokenizer_path` (SFT, RL and the saved checkpoints all use that tokenizer)."""

import json
import shutil

import pytest

from trainers.cli import main
from trainers.config.loader import validate_config
from trainers.demo.arithmetic import make_splits, write_rows
from trainers.demo.experts import make_experts, write_experts
from trainers.models.loading import load_tokenizer
from trainers.models.tiny import build_tiny_model
from trainers.training import run
from trainers.training.build import build_trainer
from trainers.training.loop import TrainResult


@pytest.fixture(scope="module")
def split_model(tmp_path_factory):
    """A tiny model whose directory has no tokenizer, and its tokenizer in a directory of its own."""
    root = tmp_path_factory.mktemp("split")
    model = build_tiny_model(root / "model", hidden_size=32, num_layers=1, num_heads=2, num_kv_heads=1)
    tokenizer = root / "tokenizer"
    tokenizer.mkdir()
    for name in ("tokenizer.json", "tokenizer_config.json"):
        shutil.move(model / name, tokenizer / name)
    return model, tokenizer


def write_config(tmp_path, model, tokenizer, **overrides) -> dict:
    train, held_out = make_splits(8, 2, seed=1)
    config = {
        "output_dir": str(tmp_path / "run"),
        "model": {"path": str(model), "tokenizer_path": str(tokenizer)},
        "tools": [{"name": "calculator"}],
        "limits": {"max_turns": 2, "max_new_tokens_per_turn": 8, "max_total_new_tokens": 16},
        "rollout": {"prompts_per_step": 2, "samples_per_prompt": 2},
        "reward": {"components": [{"name": "correctness", "params": {"mode": "numeric"}}]},
        "training": {"steps": 1},
        "sft": {
            "data_path": str(write_experts(make_experts(train), tmp_path / "experts.jsonl")),
            "batch_size": 4,
        },
        "data": {
            "train_path": str(write_rows(train, tmp_path / "train.jsonl")),
            "eval_path": str(write_rows(held_out, tmp_path / "eval.jsonl")),
        },
        **overrides,
    }
    (tmp_path / "run.json").write_text(json.dumps(config))
    return config


def test_cli_train_uses_the_configs_tokenizer_path_through_run_config(
    split_model, tmp_path, capsys, monkeypatch
):
    model, tokenizer = split_model
    write_config(tmp_path, model, tokenizer)
    calls = []
    real = run.run_config

    def spy(config, **kwargs):
        calls.append(config)
        return real(config, **kwargs)

    monkeypatch.setattr(run, "run_config", spy)
    assert main(["train", str(tmp_path / "run.json"), "--threads", "1"]) == 0
    summary = json.loads(capsys.readouterr().out.strip().splitlines()[-1])
    assert [c.model.tokenizer_path for c in calls] == [str(tokenizer)]
    assert summary["sft"]["steps"] == 2 and summary["steps"] == 1
    # The model directory alone has no tokenizer (transformers would make an empty one); the run's
    # checkpoint carries the one from tokenizer_path, which SFT and RL used.
    expected = load_tokenizer(tokenizer)
    saved = load_tokenizer(tmp_path / "run" / "checkpoints" / "step_000001")
    assert len(saved) == len(expected) > 100
    assert saved("12+3=15")["input_ids"] == expected("12+3=15")["input_ids"]


def test_cli_sft_uses_the_configs_tokenizer_path(split_model, tmp_path, capsys):
    model, tokenizer = split_model
    write_config(tmp_path, model, tokenizer)
    assert main(["sft", str(tmp_path / "run.json"), "--threads", "1"]) == 0
    assert json.loads(capsys.readouterr().out.strip().splitlines()[-1])["sft_steps"] == 2
    assert len(load_tokenizer(tmp_path / "run" / "sft")) == len(load_tokenizer(tokenizer))


def test_cli_train_resume_passes_the_latest_checkpoint_to_run_config(tmp_path, monkeypatch, capsys):
    (tmp_path / "run" / "checkpoints" / "step_000004").mkdir(parents=True)
    (tmp_path / "run" / "checkpoints" / "step_000004" / "trainer_state.pt").write_bytes(b"")
    write_config(tmp_path, "tiny", tmp_path)
    seen = {}

    def fake(config, *, should_stop=None, resume_from=None, **kwargs):
        seen.update(resume_from=resume_from, should_stop=should_stop(), **kwargs)
        return run.RunResult(TrainResult(steps_done=4), tmp_path / "run")

    monkeypatch.setattr(run, "run_config", fake)
    assert main(["train", str(tmp_path / "run.json"), "--resume"]) == 0
    assert seen == {"resume_from": tmp_path / "run" / "checkpoints" / "step_000004", "should_stop": False}
    assert json.loads(capsys.readouterr().out)["steps"] == 4


def test_keep_best_and_eval_at_start_are_config_fields_wired_into_the_loop(split_model, tmp_path):
    model, tokenizer = split_model
    raw = write_config(
        tmp_path, model, tokenizer,
        evaluation={"at_start": True}, checkpoint={"keep_best": "sampled/accuracy"},
    )  # fmt: skip
    trainer = build_trainer(validate_config(raw))
    assert trainer.settings.eval_at_start and trainer.settings.keep_best == "sampled/accuracy"
    defaults = build_trainer(validate_config({**raw, "evaluation": {}, "checkpoint": {}})).settings
    assert not defaults.eval_at_start and defaults.keep_best is None


def test_the_demo_keeps_its_best_step_through_the_config(tmp_path):
    """The demo's validation (from step 0, best step kept) is ordinary config, not edits after build."""
    from trainers.demo.recipe import DemoSettings, rl_config

    data = {"train": tmp_path / "train.jsonl", "val": tmp_path / "val.jsonl"}
    config = rl_config(DemoSettings(eval_every=5), tmp_path, tmp_path / "sft", data)
    assert config.evaluation.at_start and config.checkpoint.keep_best == "sampled/accuracy"
    config = rl_config(DemoSettings(eval_every=0), tmp_path, tmp_path / "sft", data)
    assert not config.evaluation.at_start and config.checkpoint.keep_best is None
