"""A new estimator is one class with its parameters and one registration: the run config accepts it
(and names its bad parameters), the workbench's schema lists it, and the trainer computes with it."""

import pytest
import torch
from pydantic import Field

from trainers.advantages import (
    ESTIMATORS,
    AdvantageBatch,
    AdvantageEstimator,
    AdvantageResult,
    EstimatorParams,
)
from trainers.advantages.base import outcome_result
from trainers.config import ConfigError, RunConfig, validate_config
from trainers.demo.arithmetic import make_splits, write_rows
from trainers.models.tiny import build_tiny_model
from trainers.training.build import build_trainer


class ShiftedRewardParams(EstimatorParams):
    shift: float = Field(0.5, gt=0.0, description="added to every reward")


class ShiftedReward(AdvantageEstimator):
    """A = r + shift: no baseline, but a value the test can predict for any rollout."""

    Params = ShiftedRewardParams
    compares_group_samples = True

    def __init__(self, shift: float = 0.5) -> None:
        self.shift = shift

    def compute(self, batch: AdvantageBatch) -> AdvantageResult:
        return outcome_result(batch.rewards + self.shift, batch)


@pytest.fixture
def shifted_reward(monkeypatch):
    monkeypatch.setattr(ESTIMATORS, "_items", dict(ESTIMATORS._items))  # registered for this test only
    return ESTIMATORS.register("shifted_reward")(ShiftedReward)


def errors_of(data):
    with pytest.raises(ConfigError) as info:
        validate_config(data)
    return dict(info.value.errors)


def test_the_config_accepts_a_registered_estimator_and_names_its_bad_parameters(shifted_reward):
    config = validate_config({"algorithm": {"estimator": "shifted_reward", "shift": 2.0}})
    assert config.algorithm.model_dump() == {"estimator": "shifted_reward", "shift": 2.0}
    assert isinstance(config.algorithm.build(), ShiftedReward) and config.algorithm.build().shift == 2.0
    assert "algorithm.shift" in errors_of({"algorithm": {"estimator": "shifted_reward", "shift": -1.0}})
    assert "algorithm.shfit" in errors_of({"algorithm": {"estimator": "shifted_reward", "shfit": 1.0}})
    grouped = errors_of({"algorithm": {"estimator": "shifted_reward"}, "rollout": {"samples_per_prompt": 1}})
    assert "shifted_reward compares samples of a prompt" in " ".join(grouped.values())


def test_the_schema_of_the_run_form_lists_a_registered_estimator(shifted_reward):
    algorithm = RunConfig.json_schema()["properties"]["algorithm"]
    assert "shifted_reward" in algorithm["discriminator"]["mapping"]


def test_an_unregistered_estimator_is_an_error_of_the_estimator_key():
    errors = errors_of({"algorithm": {"estimator": "shifted_reward"}})
    assert list(errors) == ["algorithm.estimator"]
    assert "'grpo'" in errors["algorithm.estimator"]  # the message lists the registered ones


def test_the_trainer_computes_advantages_with_a_registered_estimator(shifted_reward, tmp_path):
    model_dir = build_tiny_model(tmp_path / "tiny", hidden_size=32, num_layers=1, num_heads=2, num_kv_heads=1)
    train, _ = make_splits(4, 0, seed=0)
    config = validate_config(
        {
            "output_dir": str(tmp_path / "run"),
            "model": {"path": str(model_dir)},
            "template": {"name": "qwen_tool"},
            "limits": {"max_turns": 1, "max_new_tokens_per_turn": 4, "max_total_new_tokens": 4},
            "rollout": {"prompts_per_step": 2, "samples_per_prompt": 2},
            "algorithm": {"estimator": "shifted_reward", "shift": 3.0},
            "training": {"steps": 1},
            "echo_trap": {"enabled": False},
            "data": {"train_path": str(write_rows(train, tmp_path / "train.jsonl"))},
        }
    )
    trainer = build_trainer(config)
    assert isinstance(trainer.estimator, ShiftedReward)
    trainer.step = 1
    trajectories = trainer.rollout(trainer.sampler.next(2), 1, 0)
    trainer.learn(trajectories)
    # each trajectory's advantage is the mean over its policy tokens of r + 3
    expected = torch.tensor([t.reward + 3.0 for t in trajectories])
    advantages = torch.tensor([t.advantage for t in trajectories])
    torch.testing.assert_close(advantages, expected, rtol=1e-6, atol=0.0)
