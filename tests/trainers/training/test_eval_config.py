"""Evaluation metrics (`summarise`) and `python -m trainers eval CONFIG` on real models and checkpoints."""

from __future__ import annotations

import json
import math

import pytest

from trainers.cli import main
from trainers.config.loader import ConfigError
from trainers.models.model_io import load_policy
from trainers.training.checkpoint import save_checkpoint
from trainers.training.eval_run import (
    EvalConfig,
    eval_config_from_run,
    evaluate_config,
    judge_mode,
    validate_eval_config,
)
from trainers.training.evaluate import correctness_judge, pass_at_k, summarise
from trainers.trajectory import ToolCall, ToolResult, Trajectory, Turn


def _traj(group: str, i: int, *, answer: str, calls: list[bool], response: int) -> Trajectory:
    """A trajectory with `response` assistant tokens and one call per entry of `calls` (True: it worked)."""
    turns = [Turn(role="prompt", text="q", token_ids=[1, 2], loss_mask=[0, 0])]
    turns.append(
        Turn(
            role="assistant",
            text="a",
            token_ids=[3] * response,
            loss_mask=[1] * response,
            tool_calls=[ToolCall(name="calculator", arguments={}) for _ in calls],
        )
    )
    if calls:
        results = [ToolResult(name="calculator", ok=ok, output="") for ok in calls]
        turns.append(Turn(role="tool", text="", token_ids=[], loss_mask=[], tool_results=results))
    return Trajectory(uid=f"{group}{i}", group_id=group, sample_index=i, turns=turns, final_answer=answer)


def test_summarise_counts_failed_calls_length_and_pass_at_k():
    trajs = [
        _traj("a", 0, answer="4", calls=[True, False], response=6),
        _traj("a", 1, answer="5", calls=[], response=2),
        _traj("b", 0, answer="9", calls=[False], response=4),
        _traj("b", 1, answer="1", calls=[True], response=4),
    ]
    correct = {"a0": True, "a1": False, "b0": False, "b1": False}
    metrics = summarise(trajs, lambda t: correct[t.uid], k=2)
    assert metrics["accuracy"] == 0.25
    assert metrics["tool_call_rate"] == 0.75
    assert metrics["tool_calls_per_solved"] == 4.0  # four calls, one solved
    assert metrics["failed_calls_per_traj"] == 0.5  # two failed calls over four trajectories
    assert metrics["failed_call_rate"] == 0.5  # two of four calls failed
    assert metrics["response_length"] == 4.0
    # unbiased pass@2 per prompt: a has 1 of 2 right (pass@2 = 1), b none (0)
    assert metrics["pass@2"] == 0.5


def test_summarise_without_calls_reports_nan_rates():
    metrics = summarise([_traj("a", 0, answer="1", calls=[], response=3)], lambda t: True, k=1)
    assert math.isnan(metrics["failed_call_rate"]) and math.isnan(metrics["tool_productivity"])
    assert "pass@1" not in metrics and metrics["accuracy"] == 1.0


def test_pass_at_k_is_the_unbiased_estimator():
    assert pass_at_k(5, 2, 2) == pytest.approx(1 - 3 / 10)  # 1 - C(3,2)/C(5,2)
    assert pass_at_k(4, 1, 1) == pytest.approx(0.25)
    assert pass_at_k(4, 0, 4) == 0.0 and pass_at_k(4, 3, 2) == 1.0


def _rows(problems: list[dict], path) -> str:
    path.write_text("".join(json.dumps(p) + "\n" for p in problems))
    return str(path)


def test_eval_cli_prints_metrics_that_match_its_trajectories(demo_sft_policy, tmp_path, capsys):
    config = {
        "model": {"path": str(demo_sft_policy["sft"])},
        "template": {"name": "qwen_tool"},
        "tools": [{"name": "calculator"}],
        "limits": {"max_turns": 3, "max_new_tokens_per_turn": 24},
        "reward": {"components": [{"name": "correctness", "params": {"mode": "numeric"}}]},
        "data_path": str(demo_sft_policy["data"]["val"]),
        "max_problems": 6,
        "samples": 3,
        "seed": 1,
    }
    (tmp_path / "eval.json").write_text(json.dumps(config))
    out = tmp_path / "trajs.jsonl"
    assert main(["eval", str(tmp_path / "eval.json"), "--trajectories", str(out)]) == 0
    metrics = json.loads(capsys.readouterr().out)
    trajs = [Trajectory.from_json(line) for line in out.read_text().splitlines()]
    assert len(trajs) == 18 and metrics["trajectories"] == 18 and metrics["problems"] == 6
    judge = correctness_judge("numeric")
    verdicts = [judge(t) for t in trajs]
    assert [t.metadata["correct"] for t in trajs] == verdicts
    assert metrics["accuracy"] == pytest.approx(sum(verdicts) / 18)
    assert metrics["pass@1"] == pytest.approx(metrics["accuracy"])  # equal groups: pass@1 is accuracy
    assert metrics["pass@3"] >= metrics["accuracy"] - 1e-12
    assert metrics["tool_call_rate"] == pytest.approx(sum(t.num_tool_calls > 0 for t in trajs) / 18)
    assert metrics["tool_call_rate"] > 0  # the SFT policy calls its calculator
    lengths = [len(t.response_token_ids) for t in trajs]
    assert metrics["response_length"] == pytest.approx(sum(lengths) / 18)
    assert metrics["failed_calls_per_traj"] == pytest.approx(sum(t.num_failed_calls for t in trajs) / 18)
    assert metrics["reward_mean"] == pytest.approx(sum(t.reward for t in trajs) / 18)


def test_evaluates_a_saved_checkpoint_with_a_run_configs_sections(tiny_model_dir, tmp_path):
    model, tokenizer = load_policy(tiny_model_dir)
    checkpoint = save_checkpoint(tmp_path / "step_000002", step=2, model=model, tokenizer=tokenizer)
    run_config = {"seed": 3, "model": {"path": "tiny"}, "template": {"name": "qwen_tool"},
                  "limits": {"max_turns": 1, "max_new_tokens_per_turn": 6}, "output_dir": "x"}  # fmt: skip
    data = _rows([{"id": "p", "question": "1 + 1?", "answer": "2"}], tmp_path / "rows.jsonl")
    config = eval_config_from_run(run_config, model={"path": str(checkpoint)}, data_path=data, samples=2)
    assert config.seed == 3 and config.limits.max_new_tokens_per_turn == 6
    metrics, trajs = evaluate_config(config)
    assert [(t.group_id, t.sample_index) for t in trajs] == [("p", 0), ("p", 1)]
    assert all(0 < t.num_policy_tokens <= 6 for t in trajs)
    assert metrics["accuracy"] == sum(t.metadata["correct"] for t in trajs) / 2


def test_tiny_model_is_built_in_the_output_dir(tmp_path):
    data = _rows([{"question": "hi", "answer": "x"}], tmp_path / "rows.jsonl")
    tiny = {"hidden_size": 32, "num_layers": 1, "num_heads": 2, "num_kv_heads": 1}
    config = EvalConfig(model={"path": "tiny", "tiny": tiny}, data_path=data, samples=1,
                        output_dir=str(tmp_path / "ev"), limits={"max_new_tokens_per_turn": 4})  # fmt: skip
    metrics, trajs = evaluate_config(config)
    assert (tmp_path / "ev" / "base_model" / "config.json").exists()
    assert len(trajs) == 1 and "pass@1" in metrics


def test_bad_eval_config_names_the_key(tmp_path):
    with pytest.raises(ConfigError) as caught:
        validate_eval_config({"data_path": "x", "samples": 0, "bogus": 1})
    paths = {path for path, _ in caught.value.errors}
    assert {"samples", "bogus"} <= paths
    with pytest.raises(FileNotFoundError):
        evaluate_config(EvalConfig(model={"path": str(tmp_path)}, data_path="x"))


def test_judge_follows_the_correctness_component():
    config = EvalConfig(
        data_path="x", reward={"components": [{"name": "correctness", "params": {"mode": "exact"}}]}
    )
    assert judge_mode(config.reward) == "exact"
    assert judge_mode(EvalConfig(data_path="x", reward={"components": [{"name": "format"}]}).reward) == "math"


def test_evaluations_run_as_jobs_leave_the_trainer_checkpointing_at_their_steps(tiny_model_dir, tmp_path):
    from trainers.config.loader import validate_config
    from trainers.training.build import build_trainer

    rows = _rows([{"question": f"{i} + 1?", "answer": str(i + 1)} for i in range(4)], tmp_path / "rows.jsonl")
    base = {"output_dir": str(tmp_path / "run"), "model": {"path": str(tiny_model_dir)},
            "rollout": {"prompts_per_step": 2, "samples_per_prompt": 2}, "checkpoint": {"every_steps": 50},
            "data": {"train_path": rows, "eval_path": rows}}  # fmt: skip
    inline = build_trainer(validate_config({**base, "evaluation": {"every_steps": 20}}))
    assert inline.evaluator is not None and inline.settings.checkpoint_every == 50
    jobs = build_trainer(validate_config({**base, "evaluation": {"every_steps": 20, "runner": "jobs"}}))
    assert jobs.evaluator is None and jobs.settings.checkpoint_every == 10  # steps 20, 40 and 50 are on it
    at_end = build_trainer(validate_config({**base, "evaluation": {"runner": "jobs"}}))
    assert at_end.evaluator is None and at_end.settings.checkpoint_every == 50  # and the final checkpoint
