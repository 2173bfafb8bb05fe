"""A run whose reward is an LLM judge: a training step asks a real local judge about every sampled
response and learns from the scores; the step metrics count the judge's calls."""

import re

from tests.support.judge_server import Answer, judge_server, user_prompt
from trainers.config.loader import validate_config
from trainers.demo.arithmetic import make_splits, write_rows
from trainers.metrics import keys
from trainers.training.build import build_trainer


def by_length(body):
    """Longer responses score higher (10 at 20 characters or more): a judge with an opinion."""
    response = re.search(r"Response:\n(.*)\Z", user_prompt(body), re.DOTALL).group(1)
    return Answer(f"SCORE: {min(10, len(response) // 2)}", prompt_tokens=20, completion_tokens=2)


def test_a_training_step_is_scored_by_the_judge(model_dir, tmp_path, monkeypatch):
    train, _ = make_splits(8, 0, seed=0)
    rubric = "Question: {{ question }}\nResponse:\n{{ response }}"
    raw = {
        "seed": 3,
        "output_dir": str(tmp_path / "run"),
        "model": {"path": str(model_dir)},
        "limits": {"max_turns": 1, "max_new_tokens_per_turn": 8, "max_total_new_tokens": 8},
        "rollout": {"prompts_per_step": 2, "samples_per_prompt": 2},
        "reward": {"components": [{"name": "judge", "params": {"judge": "local", "rubric": rubric}}]},
        "training": {"steps": 1},
        "echo_trap": {"enabled": False},
        "data": {"train_path": str(write_rows(train, tmp_path / "train.jsonl"))},
    }
    with judge_server(by_length) as server:
        server.register(monkeypatch)
        trainer = build_trainer(validate_config(raw))
        trainer.step = 1
        metrics = trainer.run_step(1)
    assert (metrics[keys.JUDGE_CALLS], metrics[keys.JUDGE_ERRORS]) == (4.0, 0.0)
    assert metrics[keys.JUDGE_TOKENS] == 4 * 22.0
    assert 0.0 <= metrics[keys.reward_component_key("judge")] <= 1.0
    assert keys.LOSS_POLICY in metrics  # the step learned from the judge's scores
    questions = {row.question for row in train}
    assert all(user_prompt(r).split("\n")[0].removeprefix("Question: ") in questions for r in server.requests)
