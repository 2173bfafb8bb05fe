"""Rows sharing a prompt encode it once; outputs and gradients equal those of one forward per row."""

import torch

from tests.trainers.floats import assert_close_float32
from trainers.training.policy import ValueHead, collate, forward_policy
from trainers.training.prompt_sharing import distinct_prompts

PAD = 0


def grouped_trajectories(build_trajectory):
    """Two groups with prompts of different lengths (left padding), multi-turn and uneven responses."""
    long_prompt, short_prompt = [5, 6, 7, 8, 9], [5, 6]
    return [
        build_trajectory(
            long_prompt, [("assistant", [8, 9]), ("tool", [10, 11]), ("assistant", [13])], "a", 0
        ),
        build_trajectory(long_prompt, [("assistant", [14, 15, 16, 17, 18, 19])], "a", 1),
        build_trajectory(long_prompt, [("assistant", [3])], "a", 2),
        build_trajectory(short_prompt, [("assistant", [20, 21, 22])], "b", 0),
        build_trajectory(
            short_prompt, [("assistant", [23]), ("tool", [24, 25]), ("assistant", [26, 27])], "b", 1
        ),
    ]


def outputs_and_grads(model, head, trajectories):
    """Sum of logprobs, entropies and values as a loss: every output reaches the gradient."""
    model.zero_grad()
    head.zero_grad()
    out = forward_policy(model, collate(trajectories, PAD), value_head=head)
    (out.logprobs.sum() + out.entropy.sum() + out.values.sum()).backward()
    grads = {name: p.grad.clone() for name, p in model.named_parameters()}
    return out, grads


def test_distinct_prompts_maps_each_row_to_its_prompt(build_trajectory):
    batch = collate(grouped_trajectories(build_trajectory), PAD)
    prompts, row_of = distinct_prompts(batch.input_ids, batch.prompt_lengths)
    assert prompts == [[5, 6, 7, 8, 9], [5, 6]]
    assert row_of.tolist() == [0, 0, 0, 1, 1]


def test_shared_prompt_forward_matches_one_forward_per_row_with_gradients(model, build_trajectory):
    torch.manual_seed(1)
    head = ValueHead(model.config.hidden_size)
    torch.nn.init.normal_(head.linear.weight)  # non-zero, so values depend on the hidden states
    trajectories = grouped_trajectories(build_trajectory)
    calls = []
    hook = model.get_decoder().register_forward_hook(
        lambda _m, _a, kw, _o: calls.append(kw), with_kwargs=True
    )
    shared, shared_grads = outputs_and_grads(model, head, trajectories)
    hook.remove()
    assert [kw["input_ids"].shape[0] for kw in calls] == [2, 5]  # the two prompts, then the five responses

    model.zero_grad()
    head.zero_grad()
    width = shared.logprobs.shape[1]
    for i, traj in enumerate(trajectories):  # a batch of one has no prompt to share: the full forward
        alone = forward_policy(model, collate([traj], PAD), value_head=head)
        n = alone.logprobs.shape[1]
        for got, expected in ((shared.logprobs, alone.logprobs), (shared.entropy, alone.entropy),
                              (shared.values, alone.values)):  # fmt: skip
            assert_close_float32(got[i, :n], expected[0].detach())
            assert torch.all(got[i, n:width] == 0)  # padding columns stay masked out
        (alone.logprobs.sum() + alone.entropy.sum() + alone.values.sum()).backward()
    for name, param in model.named_parameters():
        assert_close_float32(shared_grads[name], param.grad, msg=name)
