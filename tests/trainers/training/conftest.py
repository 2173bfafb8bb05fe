"""A very small random Qwen2 policy, a saved tiny policy and calculator rows for short runs, a reward that
varies between random samples (`test_digit_fraction`), and hand-made trajectories: shared by the training
tests."""

from __future__ import annotations

import pytest
import torch
from transformers import Qwen2Config, Qwen2ForCausalLM

from trainers.demo.arithmetic import make_splits, write_rows
from trainers.models.tiny import build_tiny_model
from trainers.rewards import REWARDS, RewardComponent
from trainers.rewards.base import assistant_text
from trainers.trajectory import Trajectory, Turn

VOCAB = 32
PAD = 0


@REWARDS.register("test_digit_fraction")
class DigitFraction(RewardComponent):
    """Share of digits in the policy text: varies between random samples, so advantages are not zero."""

    name = "test_digit_fraction"

    def score(self, trajectory, ctx):
        text = assistant_text(trajectory)
        return sum(c.isdigit() for c in text) / max(1, len(text))


@pytest.fixture(scope="module")
def model_dir(tmp_path_factory):
    """A saved 1-layer tiny policy for short end-to-end runs (built once per test module)."""
    return build_tiny_model(
        tmp_path_factory.mktemp("tiny"), hidden_size=32, num_layers=1, num_heads=2, num_kv_heads=1
    )


@pytest.fixture(scope="module")
def data(tmp_path_factory):
    """Calculator rows for short runs: (train.jsonl, eval.jsonl) paths."""
    root = tmp_path_factory.mktemp("data")
    train, held_out = make_splits(16, 2, seed=0)
    return write_rows(train, root / "train.jsonl"), write_rows(held_out, root / "eval.jsonl")


@pytest.fixture(autouse=True)
def _one_thread():
    torch.set_num_threads(1)


@pytest.fixture
def model() -> Qwen2ForCausalLM:
    torch.manual_seed(0)
    config = Qwen2Config(
        vocab_size=VOCAB,
        hidden_size=32,
        intermediate_size=64,
        num_hidden_layers=2,
        num_attention_heads=4,
        num_key_value_heads=2,
        max_position_embeddings=64,
        tie_word_embeddings=True,
        pad_token_id=PAD,
    )
    return Qwen2ForCausalLM(config).eval()


def make_trajectory(prompt: list[int], turns: list[tuple[str, list[int]]], group: str = "g", i: int = 0):
    """turns: (role, ids); assistant turns get mask 1, tool and glue turns mask 0."""
    out = [Turn(role="prompt", text="", token_ids=prompt, loss_mask=[0] * len(prompt))]
    for role, ids in turns:
        mask = [1 if role == "assistant" else 0] * len(ids)
        out.append(Turn(role=role, text="", token_ids=ids, loss_mask=mask))
    return Trajectory(uid=f"{group}-{i}", group_id=group, sample_index=i, turns=out)


@pytest.fixture
def build_trajectory():
    return make_trajectory


@pytest.fixture
def trajectories() -> list[Trajectory]:
    return [
        make_trajectory([5, 6, 7], [("assistant", [8, 9]), ("tool", [10, 11, 12]), ("assistant", [13])]),
        make_trajectory([5, 6], [("assistant", [14, 15, 16, 17])], i=1),
        make_trajectory([5, 6, 7, 8, 9], [("assistant", [3])], group="h"),
    ]
