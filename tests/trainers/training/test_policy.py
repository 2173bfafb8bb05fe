import torch
from torch.nn import functional as F

from trainers.training.policy import ValueHead, collate, forward_policy, frozen_copy, trajectory_logprobs

PAD = 0  # the conftest model's pad id


def naive_logprobs(model, traj):
    """One unpadded forward pass per trajectory: the reference the batched pass must match."""
    ids = torch.tensor([traj.token_ids])
    with torch.no_grad():
        logp = F.log_softmax(model(input_ids=ids).logits[0].float(), -1)
    start = len(traj.prompt_token_ids)
    return [float(logp[start + j - 1, tok]) for j, tok in enumerate(traj.response_token_ids)]


def test_collate_right_pads_and_masks_only_policy_tokens(trajectories):
    batch = collate(trajectories, PAD)
    assert batch.input_ids.shape == (3, 9)
    assert batch.attention_mask[2].tolist() == [1] * 6 + [0] * 3
    assert batch.prompt_lengths.tolist() == [3, 2, 5]
    assert batch.response_mask[0].tolist() == [1, 1, 0, 0, 0, 1]
    assert batch.response_mask[2].tolist() == [1, 0, 0, 0, 0, 0]
    assert batch.response_ids[1].tolist() == [14, 15, 16, 17, PAD, PAD]


def test_batched_logprobs_match_one_pass_per_trajectory(model, trajectories):
    batched = trajectory_logprobs(model, trajectories, PAD)
    for traj, got in zip(trajectories, batched, strict=True):
        expected = naive_logprobs(model, traj)
        mask = traj.response_loss_mask
        assert torch.allclose(torch.tensor(got), torch.tensor(expected) * torch.tensor(mask), atol=1e-5)


def test_entropy_is_zero_off_policy_and_bounded_by_log_vocab(model, trajectories):
    batch = collate(trajectories, PAD)
    out = forward_policy(model, batch)
    assert torch.all(out.entropy[batch.response_mask == 0] == 0)
    on = out.entropy[batch.response_mask == 1]
    assert torch.all(on > 0) and torch.all(on <= torch.log(torch.tensor(32.0)) + 1e-5)


def test_temperature_scales_logits_before_softmax(model, trajectories):
    batch = collate(trajectories[:1], PAD)
    hot = forward_policy(model, batch, temperature=2.0, with_entropy=False).logprobs
    full = model(input_ids=batch.input_ids).logits[0].float() / 2.0
    expected = F.log_softmax(full, -1)[2, 8]  # first response token, predicted from position 2
    assert torch.isclose(hot[0, 0], expected, atol=1e-5)


def test_select_trims_padding_of_a_minibatch(trajectories):
    sub = collate(trajectories, PAD).select([1])
    assert sub.input_ids.tolist() == [[5, 6, 14, 15, 16, 17]]
    assert sub.response_ids.tolist() == [[14, 15, 16, 17]]


def test_value_head_starts_at_zero_and_has_gradients(model, trajectories):
    head = ValueHead(model.config.hidden_size)
    out = forward_policy(model, collate(trajectories, PAD), value_head=head)
    assert torch.all(out.values == 0)
    out.values.sum().backward()
    assert head.linear.bias.grad is not None


def test_reference_is_frozen_and_independent(model):
    ref = frozen_copy(model)
    assert not any(p.requires_grad for p in ref.parameters())
    with torch.no_grad():
        next(model.parameters()).add_(1.0)
    assert not torch.equal(next(model.parameters()), next(ref.parameters()))


def test_entropy_for_metrics_only_has_no_graph(model, trajectories):
    batch = collate(trajectories, PAD)
    metrics_only = forward_policy(model, batch, entropy_grad=False)
    with_grad = forward_policy(model, batch)
    assert not metrics_only.entropy.requires_grad and with_grad.entropy.requires_grad
    assert metrics_only.logprobs.requires_grad
    assert torch.allclose(metrics_only.entropy, with_grad.entropy.detach())


def test_select_drops_tool_output_after_the_last_policy_token(model, build_trajectory):
    ends_with_tool = build_trajectory([5, 6], [("assistant", [7, 8]), ("tool", [9, 10, 11, 12])])
    short = build_trajectory([5, 6, 7], [("assistant", [13])], group="h")
    batch = collate([ends_with_tool, short], PAD)
    sub = batch.select([0, 1])
    assert sub.response_ids.tolist() == [[7, 8], [13, PAD]]
    assert sub.input_ids.tolist() == [[5, 6, 7, 8], [5, 6, 7, 13]]
    full, trimmed = forward_policy(model, batch), forward_policy(model, sub)
    assert torch.allclose(full.logprobs[:, :2], trimmed.logprobs, atol=1e-6)
    assert torch.all(full.logprobs[:, 2:] == 0)
