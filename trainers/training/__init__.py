"""RL training: `run_config(config)` trains a `RunConfig` the one way every entry point uses.

Kept light on import (no torch): the loop, the trainer builder and the SFT stage are imported by
`run_config` when it runs.
"""

from trainers.training.run import RunResult, run_config, run_sft_only

__all__ = ["RunResult", "run_config", "run_sft_only"]
