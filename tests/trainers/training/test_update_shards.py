"""Data-parallel shards of the update, without DeepSpeed: how a minibatch is split over ranks, and that
the ranks' gradients, averaged as DeepSpeed averages them, are the single process's gradient."""

import copy

import pytest
import torch

from trainers.losses.objective import PolicyLossConfig
from trainers.training.policy import collate
from trainers.training.update import Shard, UpdateInputs, UpdateSettings, ppo_update


@pytest.mark.parametrize("world", [1, 2, 3])
@pytest.mark.parametrize("grad_accumulation", [1, 2, 3])
@pytest.mark.parametrize("micro_batch_size", [None, 1, 2])
def test_ranks_cover_the_minibatch_once_with_as_many_micro_batches_each(
    world, grad_accumulation, micro_batch_size
):
    for size in range(1, 10):
        minibatch = torch.randperm(size, generator=torch.Generator().manual_seed(size))
        per_rank = [Shard(rank, world, micro_batch_size).micro_batches(minibatch, grad_accumulation)
                    for rank in range(world)]  # fmt: skip
        assert len({len(micros) for micros in per_rank}) == 1  # ZeRO-3: the same forwards on every rank
        assert torch.equal(torch.cat([m for micros in per_rank for m in micros]), minibatch)
        if world == 1 and micro_batch_size is None:  # the single process's split, as before shards
            expected = minibatch.tensor_split(min(grad_accumulation, size))
            assert [m.tolist() for m in per_rank[0]] == [m.tolist() for m in expected]


class Collect:
    """A stepper that keeps the accumulated gradient instead of stepping (one rank's contribution)."""

    def __init__(self, model):
        self.model, self.grads = model, []

    def backward(self, loss, *, last):
        loss.backward()

    def step(self):
        self.grads.append({n: p.grad.clone() for n, p in self.model.named_parameters() if p.grad is not None})
        self.model.zero_grad(set_to_none=True)
        return 0.0


@pytest.mark.parametrize("agg", ["token_mean", "seq_mean_token_mean", "seq_mean_token_sum"])
def test_ranks_average_to_the_single_process_gradient(model, build_trajectory, agg):
    """5 trajectories of different lengths, 2 micro-batches: each rank normalises by the whole
    minibatch's counts and scales by the world size; the mean over ranks is the gradient."""
    trajectories = [
        build_trajectory([5, 6, 7], [("assistant", [8, 9]), ("tool", [10, 11]), ("assistant", [13])], "a", 0),
        build_trajectory([5, 6], [("assistant", [14, 15, 16, 17])], "a", 1),
        build_trajectory([5, 6, 7, 8], [("assistant", [3])], "b", 0),
        build_trajectory([5, 6, 7, 8], [("assistant", [3, 4, 20, 21, 22])], "b", 1),
        build_trajectory([9], [("assistant", [23, 24])], "c", 0),
    ]
    batch = collate(trajectories, 0)
    advantages = torch.linspace(-1.0, 1.0, batch.size)[:, None].expand_as(batch.response_mask).clone()
    inputs = UpdateInputs(batch, advantages)
    settings = UpdateSettings(grad_accumulation=2, grad_clip=None)
    loss_config = PolicyLossConfig(agg=agg)

    def grads(shard):
        replica = copy.deepcopy(model)
        stepper = Collect(replica)
        ppo_update(replica, None, inputs, loss_config=loss_config, settings=settings, stepper=stepper,
                   shard=shard, generator=torch.Generator().manual_seed(0))  # fmt: skip
        (step,) = stepper.grads
        return step

    single = grads(Shard())
    ranks = [grads(Shard(rank, 2)) for rank in range(2)]
    for name, expected in single.items():
        averaged = sum(r[name] for r in ranks if name in r) / 2
        assert torch.allclose(averaged, expected, rtol=1e-5, atol=1e-8), name
