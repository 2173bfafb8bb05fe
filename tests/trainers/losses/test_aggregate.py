"""Loss aggregation modes against hand-computed values."""

import pytest
import torch

from trainers.losses import aggregate

torch.set_num_threads(1)

LOSSES = torch.tensor([[1.0, 2.0, 3.0], [4.0, 0.0, 0.0]])
MASK = torch.tensor([[1.0, 1.0, 0.0], [1.0, 0.0, 0.0]])  # the 3.0 is a masked (tool) token


def test_token_mean_over_all_policy_tokens():
    # (1 + 2 + 4) / 3
    assert float(aggregate(LOSSES, MASK, "token_mean")) == pytest.approx(7 / 3)


def test_seq_mean_token_mean():
    # ((1 + 2) / 2 + 4 / 1) / 2 = (1.5 + 4) / 2
    assert float(aggregate(LOSSES, MASK, "seq_mean_token_mean")) == pytest.approx(2.75)


def test_seq_mean_token_sum_divides_by_a_constant():
    # ((1 + 2) + 4) / 2 sequences / constant 4 = 0.875; default constant = width T = 3 -> 3.5 / 3
    assert float(aggregate(LOSSES, MASK, "seq_mean_token_sum", norm_constant=4)) == pytest.approx(0.875)
    assert float(aggregate(LOSSES, MASK, "seq_mean_token_sum")) == pytest.approx(3.5 / 3)


def test_sequence_without_policy_tokens_is_not_counted():
    mask = torch.tensor([[1.0, 1.0, 0.0], [0.0, 0.0, 0.0]])
    # only row 0 counts: (1 + 2) / 2
    assert float(aggregate(LOSSES, mask, "seq_mean_token_mean")) == pytest.approx(1.5)


@pytest.mark.parametrize("mode", ["token_mean", "seq_mean_token_mean", "seq_mean_token_sum"])
def test_micro_batches_add_up_to_the_full_batch(mode):
    counts = {"token_count": 3, "seq_count": 2, "norm_constant": 3}
    parts = [aggregate(LOSSES[i : i + 1], MASK[i : i + 1], mode, **counts) for i in range(2)]
    assert float(sum(parts)) == pytest.approx(float(aggregate(LOSSES, MASK, mode, norm_constant=3)))


def test_unknown_mode_is_an_error():
    with pytest.raises(ValueError, match="token_mean"):
        aggregate(LOSSES, MASK, "sum")
