"""`python -m trainers` with the DeepSpeed tests' reward registered: the script torchrun runs on each rank.

A random tiny policy gets the same reward from every registered component (all its responses run to the
token budget), so its advantages would be zero and the update would do nothing to compare.
"""

from __future__ import annotations

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[3]))  # the repository root, for `trainers`

from trainers.cli import main
from trainers.rewards import REWARDS, RewardComponent
from trainers.rewards.base import assistant_text

REWARD = "test_ds_digit_fraction"


if REWARD not in REWARDS:

    @REWARDS.register(REWARD)
    class DigitFraction(RewardComponent):
        """Share of digits in the policy text: varies between random samples, so advantages are not zero."""

        name = REWARD

        def score(self, trajectory, ctx):
            text = assistant_text(trajectory)
            return sum(c.isdigit() for c in text) / max(1, len(text))


if __name__ == "__main__":
    sys.exit(main())
