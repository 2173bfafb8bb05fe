"""REINFORCE++: token returns, KL folding, global normalisation, history baseline (hand-computed)."""

import torch

from trainers.advantages import ESTIMATORS, AdvantageBatch

torch.set_num_threads(1)


def two_rows(rewards=(1.0, 0.0), **extra):
    mask = torch.tensor([[1.0, 1.0, 0.0], [1.0, 1.0, 1.0]])  # row 0: two policy tokens + padding
    return AdvantageBatch(["a", "b"], torch.tensor(rewards), mask, **extra)


def test_global_batch_normalisation():
    # returns (gamma 1): row0 (1, 1), row1 (0, 0, 0) -> 5 policy tokens, mean 0.4,
    # population var (2*0.6^2 + 3*0.4^2)/5 = 0.24, std 0.4899: row0 0.6/0.4899 = 1.2247, row1 -0.8165
    result = ESTIMATORS.get("reinforce_pp")().compute(two_rows())
    expected = torch.tensor([[1.2247, 1.2247, 0.0], [-0.8165, -0.8165, -0.8165]])
    torch.testing.assert_close(result.advantages, expected, atol=1e-4, rtol=0)


def test_discounted_returns():
    # one row of 3 policy tokens, reward 1 at the end, gamma 0.5: G = (0.25, 0.5, 1)
    batch = AdvantageBatch(["a"], torch.tensor([1.0]), torch.ones(1, 3))
    result = ESTIMATORS.get("reinforce_pp")(gamma=0.5, normalize=False).compute(batch)
    torch.testing.assert_close(result.advantages, torch.tensor([[0.25, 0.5, 1.0]]))


def test_kl_folded_per_token():
    # row0 rewards (0 - 0.5*0.2, 1 - 0.5*0.4) = (-0.1, 0.8) -> returns (0.7, 0.8); padding KL ignored
    kl = torch.tensor([[0.2, 0.4, 7.0], [0.0, 0.0, 0.0]])
    result = ESTIMATORS.get("reinforce_pp")(kl_coef=0.5, normalize=False).compute(two_rows(kl=kl))
    torch.testing.assert_close(result.advantages[0], torch.tensor([0.7, 0.8, 0.0]))


def test_history_baseline_uses_past_batches_only_and_persists():
    estimator = ESTIMATORS.get("reinforce_pp")(normalize=False, history_baseline=True, history_momentum=0.5)
    first = estimator.compute(two_rows())  # no history yet: raw returns; baseline becomes mean 0.5
    torch.testing.assert_close(first.advantages[0], torch.tensor([1.0, 1.0, 0.0]))
    assert estimator.state_dict() == {"baseline": 0.5}
    restored = ESTIMATORS.get("reinforce_pp")(normalize=False, history_baseline=True, history_momentum=0.5)
    restored.load_state_dict(estimator.state_dict())
    # second batch rewards (1, 0) minus baseline 0.5 -> (0.5, -0.5); baseline 0.5*0.5 + 0.5*0.5 = 0.5
    second = restored.compute(two_rows())
    torch.testing.assert_close(second.advantages, torch.tensor([[0.5, 0.5, 0.0], [-0.5, -0.5, -0.5]]))
    assert restored.baseline == 0.5


def test_group_baseline_subtracts_the_prompt_mean():
    # group g: rewards (1, 0, 0) -> mean 1/3 -> (2/3, -1/3, -1/3) on every token (gamma 1, no normalisation)
    batch = AdvantageBatch(["g", "g", "g"], torch.tensor([1.0, 0.0, 0.0]), torch.ones(3, 2))
    result = ESTIMATORS.get("reinforce_pp")(normalize=False, group_baseline=True).compute(batch)
    torch.testing.assert_close(result.advantages[:, 0], torch.tensor([2 / 3, -1 / 3, -1 / 3]))
