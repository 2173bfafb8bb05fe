"""The loop end to end on a tiny random policy with the calculator tool, and exact resume."""

import pytest

from trainers.config.loader import validate_config
from trainers.training.build import build_trainer
from trainers.training.checkpoint import latest_checkpoint
from trainers.training.sinks import read_jsonl

TIMING_PREFIXES = ("time/", "perf/")


def config(model_dir, data, out, **overrides):
    base = {
        "seed": 3,
        "output_dir": str(out),
        "model": {"path": str(model_dir)},
        "template": {"name": "qwen_tool"},
        "tools": [{"name": "calculator"}],
        "limits": {"max_turns": 1, "max_new_tokens_per_turn": 8, "max_total_new_tokens": 8},
        "rollout": {"prompts_per_step": 2, "samples_per_prompt": 4},
        "reward": {
            "components": [
                {"name": "test_digit_fraction"},
                {"name": "correctness", "params": {"mode": "exact"}},
            ]
        },
        "optimizer": {"lr": 1e-3},
        "training": {"steps": 4, "ppo_epochs": 2, "minibatch_size": 4, "grad_accumulation": 2},
        "evaluation": {"pass_k": 2},
        "checkpoint": {"every_steps": 2},
        "data": {"train_path": str(data[0]), "eval_path": str(data[1])},
    }
    base.update(overrides)
    return validate_config(base)


def learning_metrics(run_dir):
    return [
        {k: v for k, v in m.items() if not k.startswith(TIMING_PREFIXES)}
        for m in read_jsonl(run_dir / "metrics.jsonl")
    ]


def test_loop_writes_metrics_trajectories_eval_and_checkpoints(model_dir, data, tmp_path):
    result = build_trainer(config(model_dir, data, tmp_path, training={"steps": 2})).train()
    assert result.steps_done == 2 and not result.stopped
    metrics = read_jsonl(tmp_path / "metrics.jsonl")
    assert [m["step"] for m in metrics] == [1, 2]
    for key in ("reward/mean", "reward/group_std_mean", "loss/policy", "loss/entropy", "loss/grad_norm",
                "loss/clipfrac_low", "time/generation", "time/update", "perf/tokens_per_s"):  # fmt: skip
        assert key in metrics[0], key
    assert metrics[0]["reward/group_std_mean"] > 0  # the test reward gives the update something to do
    assert len(read_jsonl(tmp_path / "trajectories.jsonl")) == 2 * 8
    (evaluation,) = read_jsonl(tmp_path / "eval.jsonl")
    assert {"greedy/accuracy", "sampled/accuracy", "sampled/pass@2", "sampled/tool_call_rate"} <= set(
        evaluation
    )
    assert latest_checkpoint(tmp_path).name == "step_000002"


@pytest.mark.slow
def test_resume_continues_exactly_like_an_uninterrupted_run(model_dir, data, tmp_path):
    build_trainer(config(model_dir, data, tmp_path / "full")).train()
    first = build_trainer(
        config(model_dir, data, tmp_path / "split"), should_stop=lambda: trainer_step() >= 2
    )
    trainer_step = lambda: first.step  # noqa: E731
    assert first.train().stopped
    second = build_trainer(config(model_dir, data, tmp_path / "split"))
    second.resume(latest_checkpoint(tmp_path / "split"))
    assert second.step == 2
    second.train()
    full, split = learning_metrics(tmp_path / "full"), learning_metrics(tmp_path / "split")
    assert [m["step"] for m in split] == [1, 2, 3, 4]
    for a, b in zip(full[2:], split[2:], strict=True):
        assert a.keys() == b.keys()
        for key in a:
            assert a[key] == pytest.approx(b[key], rel=1e-5, abs=1e-7), key
