"""Training on an accelerator must not mix devices: the update and SFT put every tensor on the model's.

There is no GPU here, so the model goes to PyTorch's `meta` device: meta tensors have shapes but no
data, and an op mixing them with CPU tensors raises just as CUDA does, so a CPU tensor left anywhere on
the path fails these tests. The forward and backward run shape-only; what needs data stops them short:
the optimiser step (the steppers below collect gradients instead of stepping) and `Tensor.item()`
(statistics of meta tensors are NaN). Meta models use eager attention: the SDPA mask helper of
transformers reads the mask's values to skip it.
"""

from __future__ import annotations

import copy
import math

import pytest
import torch

from trainers.losses.objective import PolicyLossConfig
from trainers.metrics import keys
from trainers.training.mismatch import sampler_logprobs
from trainers.training.policy import ValueHead, collate, forward_policy, frozen_copy, model_device
from trainers.training.sft import sft_loss
from trainers.training.update import Shard, UpdateInputs, UpdateSettings, ppo_update
from trainers.trajectory import Trajectory

META = torch.device("meta")


def on_meta(model: torch.nn.Module) -> torch.nn.Module:
    model.config._attn_implementation = "eager"
    return model.to(META)


class Collect:
    """A stepper that stops right before the optimiser step (meta tensors have no values to step with)."""

    def __init__(self, params):
        self.params, self.steps = list(params), 0

    def backward(self, loss, *, last):
        assert loss.device == META
        loss.backward()

    def step(self):
        self.steps += 1
        assert all(p.grad is not None and p.grad.device == META for p in self.params)
        for p in self.params:
            p.grad = None
        return float("nan")


def grouped_trajectories(build_trajectory) -> list[Trajectory]:
    """Two groups sharing their prompts (the shared-prompt forward), multi-turn, with sampler log-probs."""
    trajectories = [
        build_trajectory([5, 6, 7], [("assistant", [8, 9]), ("tool", [10, 11]), ("assistant", [13])], "a", 0),
        build_trajectory([5, 6, 7], [("assistant", [14, 15, 16, 17])], "a", 1),
        build_trajectory([5, 6, 7, 8], [("assistant", [3])], "b", 0),
        build_trajectory([5, 6, 7, 8], [("assistant", [3, 4, 20])], "b", 1),
    ]
    for t in trajectories:
        for turn in t.assistant_turns:
            turn.logprobs = [-1.0] * len(turn.token_ids)
    return trajectories


def test_the_device_is_the_model_parameters(model):
    """Nothing names "cuda": the batch follows wherever the model's parameters are."""
    assert model_device(model) == torch.device("cpu")
    assert model_device(on_meta(model)) == META


@pytest.mark.parametrize(
    "shard",
    [Shard(), Shard(share_prompts=False), Shard(rank=1, world=3, micro_batch_size=1)],
    ids=["shared-prompts", "one-pass", "rank-with-empty-micro-batch"],
)
def test_ppo_update_runs_on_the_models_device(model, build_trajectory, shard):
    """A CPU batch, CPU advantages, returns and sampler log-probs, the policy and its reference (and the
    critic) on the device: the old and reference log-probs, every loss term and the backward run there."""
    trajectories = grouped_trajectories(build_trajectory)
    policy = on_meta(model)
    reference = frozen_copy(policy)
    value_head = ValueHead(policy.config.hidden_size).to(META)
    batch = collate(trajectories, 0)
    with torch.no_grad():
        old = forward_policy(policy, batch, with_entropy=False, value_head=value_head)
        ref_logprobs = forward_policy(reference, batch, with_entropy=False).logprobs
    assert old.logprobs.device == META and old.values.device == META
    advantages = torch.linspace(-1.0, 1.0, batch.size)[:, None].expand_as(batch.response_mask).clone()
    returns = advantages.clone()
    sampled = sampler_logprobs(trajectories, batch.response_ids.shape[1])
    inputs = UpdateInputs(batch, advantages, old, ref_logprobs, returns, sampled)
    loss_config = PolicyLossConfig(kl_kind="k3", kl_coef=0.1, entropy_coef=0.01, tis_cap=2.0)
    settings = UpdateSettings(minibatch_size=3, grad_accumulation=2)
    stepper = Collect([*policy.parameters(), *value_head.parameters()])
    stats = ppo_update(
        policy, None, inputs, loss_config=loss_config, settings=settings, value_head=value_head,
        generator=torch.Generator().manual_seed(0), stepper=stepper, shard=shard,
    )  # fmt: skip
    assert stepper.steps == settings.minibatches(batch.size)
    assert math.isnan(stats[keys.LOSS_GRAD_NORM])
    if shard.world == 1:  # the rank that only runs empty micro-batches reports no loss
        assert {keys.LOSS_TOTAL, keys.LOSS_KL, keys.LOSS_ENTROPY, keys.LOSS_VALUE} <= stats.keys()


def test_sft_loss_and_backward_run_on_the_models_device(model, build_trajectory):
    """SFT's cross-entropy of a CPU-collated batch, up to the backward (the optimiser step needs data)."""
    policy = on_meta(copy.deepcopy(model))
    loss = sft_loss(policy, grouped_trajectories(build_trajectory), 0)
    assert loss.device == META and loss.dim() == 0
    loss.backward()
    assert all(p.grad is not None and p.grad.device == META for p in policy.parameters())
