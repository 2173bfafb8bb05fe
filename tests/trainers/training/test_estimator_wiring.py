"""Estimators wired into the loop and the run config: REINFORCE++'s KL in the reward,
ReMax's greedy baseline (reward context and environment level), Dr. GRPO's constant normaliser and
REINFORCE++'s group baseline. Expected values are worked out by hand in the comments."""

import json
import math
import zlib

import pytest
import torch
from torch import nn

from trainers.advantages import ESTIMATORS, AdvantageBatch
from trainers.config.loader import ConfigError, load_config, validate_config
from trainers.demo.arithmetic import make_splits, write_rows
from trainers.envs.frozenlake import FrozenLake
from trainers.training.build import build_trainer
from trainers.training.policy import TokenBatch
from trainers.training.update import UpdateInputs, ppo_update

LAKE_QUESTION = "Walk the player P to the goal G without stepping into a hole O."


@pytest.fixture(scope="module")
def data(tmp_path_factory):
    train, _ = make_splits(8, 0, seed=0)
    return write_rows(train, tmp_path_factory.mktemp("data") / "train.jsonl")


def config(model_dir, train_path, out, **overrides):
    base = {
        "seed": 3,
        "output_dir": str(out),
        "model": {"path": str(model_dir)},
        "template": {"name": "qwen_tool"},
        "limits": {"max_turns": 1, "max_new_tokens_per_turn": 8, "max_total_new_tokens": 8},
        "rollout": {"prompts_per_step": 2, "samples_per_prompt": 2},
        "reward": {"components": [{"name": "correctness", "params": {"mode": "exact"}}]},
        "optimizer": {"lr": 1e-3},
        "training": {"steps": 1},  # one PPO epoch, no minibatches: an on-policy update keeps no old logprobs
        "echo_trap": {"enabled": False},
        "data": {"train_path": str(train_path)},
    }
    base.update(overrides)
    return validate_config(base)


def token_id(tokenizer, text):
    (token,) = tokenizer.encode(text, add_special_tokens=False)
    return token


def uniform_head(model, allowed):
    """Next-token distribution uniform over `allowed` at every position: the LM head's weight is zero
    and its bias 0 on `allowed`, -1e4 elsewhere (exp(-1e4) is 0 in float32), so each allowed token has
    probability exactly 1 / len(allowed) and no other token is ever sampled."""
    old = model.get_output_embeddings()
    head = nn.Linear(old.in_features, old.out_features, bias=True)
    with torch.no_grad():
        head.weight.zero_()
        head.bias.fill_(-1e4)
        head.bias[allowed] = 0.0
    model.lm_head = head


def spy_on(estimator):
    """Record the batch each `compute` call gets and the result it returns."""
    seen = {}
    compute = estimator.compute

    def spy(batch):
        seen["batch"], seen["result"] = batch, compute(batch)
        return seen["result"]

    estimator.compute = spy
    return seen


def test_reinforce_pp_kl_in_reward_uses_the_policy_logprobs_on_policy(model_dir, data, tmp_path):
    algorithm = {"estimator": "reinforce_pp", "kl_in_reward": 0.1, "normalize": False}
    trainer = build_trainer(config(model_dir, data, tmp_path, algorithm=algorithm))
    a, b, c = (token_id(trainer.tokenizer, ch) for ch in "abc")
    uniform_head(trainer.model, [a, b])  # the policy moved away from its reference ...
    uniform_head(trainer.reference, [a, b, c])  # ... which also gives c a third of the mass
    seen = spy_on(trainer.estimator)
    trainer.step = 1
    trajectories = trainer.rollout(trainer.sampler.next(2), 1, 0)
    assert all(set(t.response_token_ids) <= {a, b} for t in trajectories)
    trainer.learn(trajectories)
    batch = seen["batch"]
    mask = batch.response_mask
    assert mask.sum() == 4 * 8  # 2 prompts x 2 samples, 8 tokens each (no EOS among a and b)
    # every sampled token is a or b: logp_policy = ln(1/2), logp_ref = ln(1/3), so
    # kl_coef * (logp_policy - logp_ref) = 0.1 * ln(3/2) = 0.1 * 0.4054651 = 0.04054651
    penalty = 0.1 * math.log(3 / 2)  # = 0.1 * 0.4054651
    torch.testing.assert_close(0.1 * batch.kl, penalty * mask, rtol=1e-5, atol=0.0)
    # gamma 1, no normalisation: A_0 = r - (sum of the 8 tokens' penalties) = r - 8 * 0.04054651
    first = seen["result"].advantages[:, 0]
    expected = torch.tensor([t.reward for t in trajectories]) - 8 * penalty
    torch.testing.assert_close(first, expected, rtol=1e-5, atol=1e-7)


def test_remax_step_with_a_format_reward_scores_the_greedy_baseline_with_the_template(
    model_dir, data, tmp_path
):
    reward = {
        "components": [
            {"name": "correctness", "params": {"mode": "exact"}},
            {"name": "format", "weight": 0.1, "params": {"bad": -1.0}},
        ]
    }
    run = config(model_dir, data, tmp_path, reward=reward, algorithm={"estimator": "remax"})
    trainer = build_trainer(run)
    uniform_head(trainer.model, [token_id(trainer.tokenizer, ch) for ch in "ab"])  # no tags, no answer
    seen = spy_on(trainer.estimator)
    trainer.step = 1
    metrics = trainer.run_step(1)  # raised "format reward needs a template" before
    assert metrics["train/trajectories"] == 4
    # greedy and sampled texts alike are a/b strings: correctness 0, format `bad` = -1, so
    # every reward is 1 * 0 + 0.1 * (-1) = -0.1 and every advantage -0.1 - (-0.1) = 0
    baselines = seen["batch"].baseline_rewards
    assert len(baselines) == 2
    torch.testing.assert_close(torch.tensor(list(baselines.values())), torch.full((2,), -0.1))
    torch.testing.assert_close(seen["batch"].rewards, torch.full((4,), -0.1))
    assert float(seen["result"].advantages.abs().max()) == 0.0


def test_remax_greedy_rollout_plays_the_level_of_its_group(model_dir, tmp_path):
    rows = [{"id": f"lake{i}", "question": LAKE_QUESTION} for i in range(3)]  # no initial_state
    train_path = tmp_path / "lake.jsonl"
    train_path.write_text("".join(json.dumps(r) + "\n" for r in rows), encoding="utf-8")
    overrides = {
        "tools": [{"name": "frozenlake"}],
        "reward": {"components": [{"name": "env"}]},
        "algorithm": {"estimator": "remax"},
    }
    trainer = build_trainer(config(model_dir, train_path, tmp_path / "run", **overrides))
    trainer.step = 1
    sampled = trainer.rollout(rows[:2], 1, 0) + trainer.rollout(rows[2:], 1, 1)  # a refill round too
    greedy = trainer.greedy_rollout(sampled, 1)
    assert sorted(g.group_id for g in greedy) == sorted({t.group_id for t in sampled})
    old_seed_differs = False
    for g in greedy:
        # the engine's level seed: crc32("<rollout seed>:<group id>"), rollout seed
        # = run seed * 1_000_003 + step * 101 + round = 3 * 1_000_003 + 1 * 101 + round = 3_000_110 + round
        round_ = int(g.group_id.split(".")[1])
        level = FrozenLake()
        level.reset(seed=zlib.crc32(f"{3_000_110 + round_}:{g.group_id}".encode()))
        group = [t for t in sampled if t.group_id == g.group_id]
        assert len(group) == 2
        for t in [g, *group]:
            assert t.assistant_turns[0].state_hash == level.state_hash()
            assert level.observation() in t.turns[0].text
        before = FrozenLake()  # the level the greedy rollout played before the fix (seed = step = 1)
        before.reset(seed=zlib.crc32(f"1:{g.group_id}".encode()))
        old_seed_differs |= before.state_hash() != level.state_hash()
    assert old_seed_differs  # so the check above would have caught the old seed


def token_batch(response_mask):
    """Two rows, prompt [11, 12], responses of ids 20.. under `response_mask` (right-padded)."""
    mask = torch.tensor(response_mask, dtype=torch.float32)
    rows, width = mask.shape
    lengths = mask.sum(1).long()
    response_ids = torch.zeros((rows, width), dtype=torch.long)
    input_ids = torch.zeros((rows, 2 + width), dtype=torch.long)
    attention = torch.zeros((rows, 2 + width), dtype=torch.long)
    for i, n in enumerate(lengths.tolist()):
        response_ids[i, :n] = torch.arange(20, 20 + n)
        input_ids[i, : 2 + n] = torch.tensor([11, 12, *range(20, 20 + n)])
        attention[i, : 2 + n] = 1
    return TokenBatch(input_ids, attention, torch.full((rows,), 2), response_ids, mask)


def test_dr_grpo_normaliser_is_the_generation_budget_for_every_batch_width(model_dir, data, tmp_path):
    overrides = {"algorithm": {"estimator": "dr_grpo"}, "loss": {"aggregation": "seq_mean_token_sum"}}
    trainer = build_trainer(config(model_dir, data, tmp_path, **overrides))
    assert trainer.loss_config.norm_constant == 8.0  # limits.max_total_new_tokens
    optimizer = torch.optim.SGD(trainer.model.parameters(), lr=0.0)
    losses = []
    for mask in ([[1, 1, 1], [1, 0, 0]], [[1, 1, 1, 1, 1], [1, 1, 0, 0, 0]]):  # widths 3 and 5
        batch = token_batch(mask)
        inputs = UpdateInputs(batch, torch.ones_like(batch.response_mask))  # A = 1, on-policy: ratio 1
        stats = ppo_update(trainer.model, optimizer, inputs, loss_config=trainer.loss_config,
                           settings=trainer.update)  # fmt: skip
        losses.append(stats["loss/policy"])
    # per-token loss -A * ratio = -1; loss = sum over policy tokens / sequences / 8:
    # width 3: -(3 + 1) / 2 / 8 = -0.25; width 5: -(5 + 2) / 2 / 8 = -0.4375
    # (the step's width as divisor gave -4 / 2 / 3 = -0.667 and -7 / 2 / 5 = -0.7)
    torch.testing.assert_close(torch.tensor(losses), torch.tensor([-0.25, -0.4375]), rtol=1e-5, atol=0.0)


def test_dr_grpo_normaliser_can_be_set_in_the_run_config(model_dir, data, tmp_path):
    loss = {"aggregation": "seq_mean_token_sum", "norm_constant": 1024}
    trainer = build_trainer(config(model_dir, data, tmp_path, algorithm={"estimator": "dr_grpo"}, loss=loss))
    assert trainer.loss_config.norm_constant == 1024.0
    with pytest.raises(ConfigError, match="loss.norm_constant"):
        config(model_dir, data, tmp_path, loss={"norm_constant": 0})


GROUP_BASELINE_YAML = """
algorithm:
  estimator: reinforce_pp
  group_baseline: true
  normalize: false
rollout:
  prompts_per_step: 2
  samples_per_prompt: 2
"""


def test_reinforce_pp_group_baseline_from_a_yaml_run_config(model_dir, data, tmp_path):
    path = tmp_path / "run.yaml"
    path.write_text(GROUP_BASELINE_YAML, encoding="utf-8")
    run = load_config(path)
    assert run.algorithm.estimator_kwargs()["group_baseline"] is True
    estimator = ESTIMATORS.get(run.algorithm.estimator)(**run.algorithm.estimator_kwargs())
    batch = AdvantageBatch(["g", "g", "h", "h"], torch.tensor([1.0, 3.0, 2.0, 2.0]), torch.ones(4, 1))
    # group g: mean (1 + 3) / 2 = 2 -> 1 - 2 = -1, 3 - 2 = 1; group h: mean 2 -> 0, 0
    # (one token per row, gamma 1, no normalisation: the advantage is the centred reward)
    torch.testing.assert_close(estimator.compute(batch).advantages[:, 0], torch.tensor([-1.0, 1.0, 0.0, 0.0]))
    built = build_trainer(config(model_dir, data, tmp_path / "run", algorithm=run.algorithm.model_dump()))
    assert built.estimator.group_baseline


@pytest.mark.parametrize(
    ("overrides", "message"),
    [
        ({"rollout": {"samples_per_prompt": 1}}, "group_baseline compares samples of a prompt"),
        ({"algorithm": {"history_baseline": True}}, "choose one of group_baseline and history_baseline"),
    ],
)
def test_reinforce_pp_group_baseline_is_validated(overrides, message):
    data = {"algorithm": {"estimator": "reinforce_pp", "group_baseline": True}}
    for key, value in overrides.items():
        data[key] = {**data.get(key, {}), **value}
    with pytest.raises(ConfigError, match=message):
        validate_config(data)


def test_dr_grpo_divides_by_the_generation_budget_without_being_told():
    # choosing the estimator alone gives Dr. GRPO's loss: token sums over limits.max_total_new_tokens
    raw = {"name": "dr", "model": {"path": "m"}, "algorithm": {"estimator": "dr_grpo"},
           "limits": {"max_total_new_tokens": 48}}  # fmt: skip
    config = validate_config(raw)
    assert config.loss.aggregation == "seq_mean_token_sum"
    kwargs = config.loss.policy_loss_kwargs(config.limits.max_total_new_tokens)
    assert (kwargs["agg"], kwargs["norm_constant"]) == ("seq_mean_token_sum", 48.0)
    # an aggregation chosen explicitly is kept; other estimators keep the token mean
    chosen = validate_config({**raw, "loss": {"aggregation": "token_mean"}})
    assert chosen.loss.aggregation == "token_mean"
    assert validate_config({**raw, "algorithm": {"estimator": "grpo"}}).loss.aggregation == "token_mean"
