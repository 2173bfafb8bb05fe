"""What a CLI demo shows while it works: one progress bar per phase (SFT steps, RL steps, evaluation) with
the phase's latest loss, reward or accuracy, on stderr when that is a terminal; the libraries' own bars
(transformers' "Writing model shards", huggingface_hub's) and DeepSpeed's CPU accelerator warning are
silenced. Every phase is also kept as a record (`Progress.phases`), bars or not, for the tests to read.
"""

from __future__ import annotations

import os
import sys
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import TextIO

from tqdm import tqdm

from trainers.metrics import keys
from trainers.training.sinks import MultiSink, NullSink, RunDirSink, Sink


@dataclass
class PhaseRecord:
    """A phase as it went: its name, the steps it planned and took, and its latest numbers."""

    name: str
    total: int
    done: int = 0
    latest: dict[str, float] = field(default_factory=dict)


class Phase:
    """One phase's bar: `advance` a step with its numbers, `show` numbers without a step."""

    def __init__(self, record: PhaseRecord, bar: tqdm) -> None:
        self.record, self.bar = record, bar

    def advance(self, steps: int = 1, **numbers: float) -> None:
        self.record.done += steps
        self.show(**numbers)
        self.bar.update(steps)

    def show(self, **numbers: float) -> None:
        self.record.latest.update(numbers)
        shown = {name: f"{value:.3g}" for name, value in self.record.latest.items()}
        self.bar.set_postfix(shown, refresh=False)


class Progress:
    """The demo's phases; bars on `stream` (stderr) only when it is a terminal, unless `enabled` says."""

    def __init__(self, *, enabled: bool | None = None, stream: TextIO | None = None) -> None:
        self.stream = stream if stream is not None else sys.stderr
        self.enabled = self.stream.isatty() if enabled is None else enabled
        self.phases: list[PhaseRecord] = []

    @contextmanager
    def phase(self, name: str, total: int) -> Iterator[Phase]:
        record = PhaseRecord(name, total)
        self.phases.append(record)
        bar = tqdm(total=total, desc=name, unit="step", file=self.stream, disable=not self.enabled)
        try:
            yield Phase(record, bar)
        finally:
            bar.close()


def rl_sink(run_dir: Path, phase: Phase) -> Sink:
    """The run directory's files, as `run_config` writes them by default, and the RL phase's bar."""
    return MultiSink([RunDirSink(run_dir), ProgressSink(phase)])


class ProgressSink(NullSink):
    """A run's sink that moves the RL phase's bar: a step per logged step, with its reward mean and the
    latest validation accuracy. Runs beside the run directory's sink (MultiSink)."""

    def __init__(self, phase: Phase) -> None:
        self.phase = phase

    def log_metrics(self, step: int, metrics: dict[str, float]) -> None:
        self.phase.advance(reward=metrics.get(keys.REWARD_MEAN, float("nan")))

    def log_eval(self, step: int, results: dict[str, float]) -> None:
        accuracy = results.get("sampled/accuracy", results.get("accuracy"))
        if accuracy is not None:
            self.phase.show(val_accuracy=accuracy)


def evaluation_numbers(mode: str, metrics: Mapping[str, float]) -> dict[str, float]:
    """An evaluation mode's headline number for its bar: greedy or sampled accuracy."""
    return {f"{mode}_accuracy": metrics["accuracy"]} if "accuracy" in metrics else {}


def quiet_libraries() -> None:
    """No bars but ours: transformers' and huggingface_hub's off, and DeepSpeed told the accelerator is the
    CPU (where there is no GPU) so it does not warn that it could not detect one when something imports it."""
    import torch
    from huggingface_hub.utils import disable_progress_bars
    from transformers.utils import logging as transformers_logging

    transformers_logging.disable_progress_bar()
    disable_progress_bars()
    if not torch.cuda.is_available():
        os.environ.setdefault("DS_ACCELERATOR", "cpu")
