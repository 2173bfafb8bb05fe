"""Rows sharing a prompt encode it once; outputs and gradients equal those of one forward per row."""

import torch

from tests.trainers.floats import assert_close_float32
from trainers.training.policy import ValueHead, collate, forward_policy
from trainers.training.prompt_sharing import MIN_SHARED_PREFIX, common_prefix_length, distinct_prompts

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


def distinct_trajectories_with_a_system_prefix(build_trajectory):
    """Every prompt differs (SFT rows, one sample per prompt) but opens with the same 20 tokens."""
    system = [(i % 20) + 3 for i in range(MIN_SHARED_PREFIX + 4)]
    return [
        build_trajectory(
            system + [23, 24, 25], [("assistant", [8, 9]), ("tool", [10, 11]), ("assistant", [13])], "a", 0
        ),  # fmt: skip
        build_trajectory(system + [26], [("assistant", [14, 15, 16, 17, 18, 19])], "b", 0),
        build_trajectory(system + [27, 28], [("assistant", [3])], "c", 0),
    ]


def test_common_prefix_stops_before_the_shortest_prompts_last_token(build_trajectory):
    batch = collate(distinct_trajectories_with_a_system_prefix(build_trajectory), PAD)
    assert common_prefix_length(batch.input_ids, batch.prompt_lengths) == MIN_SHARED_PREFIX + 4
    alike = collate([build_trajectory([5, 6, 7], [("assistant", [1])], "a", i) for i in range(2)], PAD)
    assert common_prefix_length(alike.input_ids, alike.prompt_lengths) == 2  # not the token that predicts
    assert common_prefix_length(alike.input_ids[:1], alike.prompt_lengths[:1]) == 0  # one row shares nothing


def test_shared_system_prefix_forward_matches_one_forward_per_row_with_gradients(model, build_trajectory):
    torch.manual_seed(2)
    head = ValueHead(model.config.hidden_size)
    torch.nn.init.normal_(head.linear.weight)
    trajectories = distinct_trajectories_with_a_system_prefix(build_trajectory)
    calls = []
    hook = model.get_decoder().register_forward_hook(
        lambda _m, _a, kw, _o: calls.append(kw), with_kwargs=True
    )
    shared, shared_grads = outputs_and_grads(model, head, trajectories)
    hook.remove()
    # the prefix once, then the rest of the three rows
    assert [tuple(kw["input_ids"].shape) for kw in calls][0] == (1, MIN_SHARED_PREFIX + 4)
    assert calls[1]["input_ids"].shape[0] == 3

    model.zero_grad()
    head.zero_grad()
    width = shared.logprobs.shape[1]
    for i, traj in enumerate(trajectories):
        alone = forward_policy(model, collate([traj], PAD), value_head=head)
        n = alone.logprobs.shape[1]
        for got, expected in ((shared.logprobs, alone.logprobs), (shared.entropy, alone.entropy),
                              (shared.values, alone.values)):  # fmt: skip
            assert_close_float32(got[i, :n], expected[0].detach())
            assert torch.all(got[i, n:width] == 0)
        (alone.logprobs.sum() + alone.entropy.sum() + alone.values.sum()).backward()
    for name, param in model.named_parameters():
        assert_close_float32(shared_grads[name], param.grad, msg=name)
