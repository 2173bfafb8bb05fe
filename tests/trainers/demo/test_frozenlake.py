"""Multi-turn RL end to end: a tiny model SFT'd on FrozenLake experts, then GRPO and GiGPO on the env."""

import json

import pytest
import torch

from trainers.demo.frozenlake import lake_config, lake_rows, make_lake_experts, shortest_path
from trainers.demo.model import build_demo_model
from trainers.envs.frozenlake import FrozenLake
from trainers.templates import TEMPLATES
from trainers.tools.toolset import Toolset
from trainers.training.build import build_trainer
from trainers.training.model_io import load_policy
from trainers.training.sft import render_experts, sft_train
from trainers.training.sinks import read_jsonl


def test_shortest_path_reaches_the_goal():
    env = FrozenLake()
    env.reset(None, seed=7)
    for action in shortest_path(env):
        _, reward, done = env.step(action)
    assert (reward, done) == (1.0, True)


@pytest.fixture(scope="module")
def sft_model(tmp_path_factory):
    torch.set_num_threads(1)
    root = tmp_path_factory.mktemp("lake")
    records = make_lake_experts(96, seed=0)
    template = TEMPLATES.get("qwen_tool")()
    tools = Toolset.build(["frozenlake"]).specs()
    base = build_demo_model(root / "base", records, template=template, tools=tools, hidden_size=64,
                            num_layers=2, num_heads=2, num_kv_heads=1)  # fmt: skip
    model, tokenizer = load_policy(base)
    examples = render_experts(records, template=template, tokenizer=tokenizer, tools=tools)
    sft_train(model, examples, pad_token_id=tokenizer.pad_token_id, steps=120, batch_size=16, lr=3e-3)
    train_path = root / "rows.jsonl"
    train_path.write_text("".join(json.dumps(r) + "\n" for r in lake_rows(16)))
    return model, tokenizer, train_path


@pytest.mark.slow
@pytest.mark.parametrize("estimator", ["grpo", "gigpo"])
def test_multi_turn_rl_runs_and_credits_each_step(sft_model, estimator, tmp_path):
    model, tokenizer, train_path = sft_model
    config = lake_config(estimator, tmp_path, tmp_path, train_path, training={"steps": 2})
    build_trainer(config, model=model, tokenizer=tokenizer).train()
    metrics = read_jsonl(tmp_path / "metrics.jsonl")
    assert len(metrics) == 2 and all("loss/policy" in m for m in metrics)
    assert max(m["rollout/turns"] for m in metrics) > 1.5  # the SFT'd policy plays several moves
    trajectories = read_jsonl(tmp_path / "trajectories.jsonl")
    multi = [t for t in trajectories if sum(turn["role"] == "assistant" for turn in t["turns"]) > 1]
    assert multi
    for traj in multi:
        assert all(turn["advantage"] is not None for turn in traj["turns"] if turn["role"] == "assistant")
    if estimator == "gigpo":
        assert any(t["metadata"].get("anchor_groups") for t in multi)
