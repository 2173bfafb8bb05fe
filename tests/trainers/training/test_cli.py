"""`python -m trainers train CONFIG` and `sft CONFIG` on a tiny model: SFT stage, RL, run directory."""

import json

import pytest

from trainers.cli import main
from trainers.demo.arithmetic import make_splits, write_rows
from trainers.demo.experts import make_experts, write_experts
from trainers.models.tiny import build_tiny_model
from trainers.training.sinks import read_jsonl


@pytest.fixture
def config_path(tmp_path):
    model = build_tiny_model(tmp_path / "tiny", hidden_size=32, num_layers=1, num_heads=2, num_kv_heads=1)
    train, held_out = make_splits(8, 2, seed=1)
    config = {
        "output_dir": str(tmp_path / "run"),
        "model": {"path": str(model)},
        "tools": [{"name": "calculator"}],
        "limits": {"max_turns": 2, "max_new_tokens_per_turn": 8, "max_total_new_tokens": 16},
        "rollout": {"prompts_per_step": 2, "samples_per_prompt": 2},
        "reward": {"components": [{"name": "correctness", "params": {"mode": "numeric"}}]},
        "training": {"steps": 2},
        "sft": {
            "data_path": str(write_experts(make_experts(train), tmp_path / "experts.jsonl")),
            "batch_size": 4,
        },
        "data": {
            "train_path": str(write_rows(train, tmp_path / "train.jsonl")),
            "eval_path": str(write_rows(held_out, tmp_path / "eval.jsonl")),
        },
    }
    path = tmp_path / "run.json"
    path.write_text(json.dumps(config))
    return path


def test_train_runs_sft_then_rl_into_the_run_directory(config_path, tmp_path, capsys):
    assert main(["train", str(config_path), "--threads", "1"]) == 0
    summary = json.loads(capsys.readouterr().out.strip().splitlines()[-1])
    assert summary["sft"]["steps"] == 2  # one epoch of 8 experts in batches of 4
    assert summary["steps"] == 2 and not summary["stopped"]
    assert [m["step"] for m in read_jsonl(tmp_path / "run" / "metrics.jsonl")] == [1, 2]
    assert (tmp_path / "run" / "checkpoints" / "step_000002" / "model.safetensors").exists()


def test_resume_flag_continues_after_the_latest_checkpoint(config_path, tmp_path, capsys):
    main(["train", str(config_path)])
    config = json.loads(config_path.read_text())
    config["training"]["steps"] = 3
    config_path.write_text(json.dumps(config))
    capsys.readouterr()
    main(["train", str(config_path), "--resume"])
    summary = json.loads(capsys.readouterr().out.strip().splitlines()[-1])
    assert "sft" not in summary  # a resumed run does not redo its SFT stage
    assert [m["step"] for m in read_jsonl(tmp_path / "run" / "metrics.jsonl")] == [1, 2, 3]


def test_sft_subcommand_saves_a_loadable_model(config_path, tmp_path, capsys):
    assert main(["sft", str(config_path)]) == 0
    assert (tmp_path / "run" / "sft" / "model.safetensors").exists()
    assert json.loads(capsys.readouterr().out.strip().splitlines()[-1])["sft_steps"] == 2


def test_a_config_that_does_not_validate_is_one_line_naming_the_key(tmp_path, capsys):
    bad = tmp_path / "bad.yaml"
    bad.write_text("training: {steps: 0}\n")
    assert main(["train", str(bad)]) == 2
    err = capsys.readouterr().err
    assert err.startswith(f"python -m trainers train: error: invalid {bad}") and "training.steps" in err
    assert "Traceback" not in err
    assert main(["sft", str(tmp_path / "missing.yaml")]) == 2
    assert "No such file or directory" in capsys.readouterr().err
