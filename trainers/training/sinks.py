"""Where a run's outputs go: the `Sink` interface, a run-directory sink and a fan-out to several sinks.

The training loop only talks to a `Sink`; the workbench adds a database sink with the same methods.
"""

from __future__ import annotations

import json
import math
import re
from abc import ABC, abstractmethod
from collections.abc import Sequence
from enum import StrEnum
from pathlib import Path
from typing import Any

from trainers.trajectory import Trajectory


class Phase(StrEnum):
    """What a run is doing between the records it logs (`Sink.log_phase`): a dashboard names it while no
    new step arrives (loading, SFT done but RL not started yet, an evaluation, a checkpoint upload)."""

    LOADING = "loading"  # loading the policy and its tokenizer
    SFT = "sft"  # the SFT warm start (its steps arrive as log_sft)
    STARTING_RL = "starting_rl"  # building the trainer (reference model, sampler), resuming a checkpoint
    EVALUATING = "evaluating"  # evaluating the policy
    SAVING = "saving"  # saving a checkpoint (and the sink's copy of it)
    TRAINING = "training"  # RL steps: rollouts and updates


class Sink(ABC):
    """Receives metrics, trajectories, evaluations, checkpoints and alerts as the run produces them."""

    def log_phase(self, phase: Phase) -> None:  # noqa: B027 (optional: a sink may ignore phases)
        """The run has entered `phase`; it stays there until the next call."""

    @abstractmethod
    def log_metrics(self, step: int, metrics: dict[str, float]) -> None: ...

    @abstractmethod
    def log_trajectories(self, step: int, trajectories: Sequence[Trajectory]) -> None: ...

    @abstractmethod
    def log_eval(self, step: int, results: dict[str, float]) -> None: ...

    @abstractmethod
    def log_checkpoint(self, step: int, path: Path) -> None: ...

    @abstractmethod
    def log_alerts(self, alerts: Sequence[Any]) -> None: ...

    @abstractmethod
    def log_sft(self, step: int, metrics: dict[str, float]) -> None:
        """One step of the SFT warm start (sft/* keys), numbered by SFT step; RL steps then count from 1."""

    @abstractmethod
    def close(self) -> None:
        """Flush and release resources."""


class NullSink(Sink):
    """Logs nothing: the ranks other than 0 of a DeepSpeed group (rank 0 logs the whole batch), and the
    base of sinks that keep only one kind of record."""

    def log_metrics(self, step: int, metrics: dict[str, float]) -> None:
        pass

    def log_trajectories(self, step: int, trajectories: Sequence[Trajectory]) -> None:
        pass

    def log_eval(self, step: int, results: dict[str, float]) -> None:
        pass

    def log_checkpoint(self, step: int, path: Path) -> None:
        pass

    def log_alerts(self, alerts: Sequence[Any]) -> None:
        pass

    def log_sft(self, step: int, metrics: dict[str, float]) -> None:
        pass

    def close(self) -> None:
        pass


_SURROGATE = re.compile("[\ud800-\udfff]")


def _jsonable(value: Any) -> Any:
    """Alerts and metrics may be dataclasses or pydantic models; NaN/inf become null (valid JSON)."""
    if hasattr(value, "model_dump"):
        return value.model_dump()
    if hasattr(value, "__dataclass_fields__"):
        from dataclasses import asdict

        return asdict(value)
    if isinstance(value, float) and not math.isfinite(value):
        return None
    return value


def _record(trajectory: Trajectory) -> dict[str, Any]:
    """`Trajectory.to_dict()` without `asdict`'s deep copies (a tenth of a step's time on the CPU demo)."""

    def plain(obj: Any) -> dict[str, Any]:
        return dict(vars(obj))

    turns = [
        {
            **plain(t),
            "tool_calls": [plain(c) for c in t.tool_calls],
            "tool_results": [plain(r) for r in t.tool_results],
        }
        for t in trajectory.turns
    ]
    return {**plain(trajectory), "turns": turns}


def _line(record: dict[str, Any]) -> str:
    clean = {k: _jsonable(v) for k, v in record.items()}
    text = json.dumps(clean, ensure_ascii=False, default=str) + "\n"
    if not text.isascii() and _SURROGATE.search(text):
        # A lone surrogate in model text ("\\ud800" decoded from a call) cannot be written as UTF-8: the
        # write raised and ended the run. U+FFFD keeps the line valid JSON; a real pair is joined.
        text = text.encode("utf-16-le", "surrogatepass").decode("utf-16-le", "replace")
    return text


class RunDirSink(Sink):
    """A run directory: metrics.jsonl, trajectories.jsonl, eval.jsonl, alerts.jsonl, checkpoints.jsonl and,
    when the run starts with SFT, sft.jsonl."""

    def __init__(self, run_dir: str | Path, trajectories_every: int = 1) -> None:
        self.run_dir = Path(run_dir)
        self.run_dir.mkdir(parents=True, exist_ok=True)
        self.trajectories_every = trajectories_every  # trajectories dominate disk use; log every n-th step
        self._files: dict[str, Any] = {}

    def _write(self, name: str, text: str) -> None:
        if name not in self._files:
            self._files[name] = open(self.run_dir / name, "a", encoding="utf-8")  # noqa: SIM115
        handle = self._files[name]
        handle.write(text)
        handle.flush()  # a live dashboard tails these files

    def log_metrics(self, step: int, metrics: dict[str, float]) -> None:
        self._write("metrics.jsonl", _line({"step": step, **metrics}))

    def log_trajectories(self, step: int, trajectories: Sequence[Trajectory]) -> None:
        if self.trajectories_every <= 0 or step % self.trajectories_every:
            return
        self._write("trajectories.jsonl", "".join(_line({"step": step, **_record(t)}) for t in trajectories))

    def log_eval(self, step: int, results: dict[str, float]) -> None:
        self._write("eval.jsonl", _line({"step": step, **results}))

    def log_sft(self, step: int, metrics: dict[str, float]) -> None:
        self._write("sft.jsonl", _line({"step": step, **metrics}))

    def log_checkpoint(self, step: int, path: Path) -> None:
        self._write("checkpoints.jsonl", _line({"step": step, "path": str(path)}))

    def log_alerts(self, alerts: Sequence[Any]) -> None:
        if alerts:
            self._write("alerts.jsonl", "".join(_line({"alert": a}) for a in alerts))

    def close(self) -> None:
        for handle in self._files.values():
            handle.close()
        self._files.clear()


class MultiSink(Sink):
    """Sends everything to each of its sinks, in order."""

    def __init__(self, sinks: Sequence[Sink]) -> None:
        self.sinks = list(sinks)

    def log_metrics(self, step: int, metrics: dict[str, float]) -> None:
        for sink in self.sinks:
            sink.log_metrics(step, metrics)

    def log_trajectories(self, step: int, trajectories: Sequence[Trajectory]) -> None:
        for sink in self.sinks:
            sink.log_trajectories(step, trajectories)

    def log_eval(self, step: int, results: dict[str, float]) -> None:
        for sink in self.sinks:
            sink.log_eval(step, results)

    def log_checkpoint(self, step: int, path: Path) -> None:
        for sink in self.sinks:
            sink.log_checkpoint(step, path)

    def log_alerts(self, alerts: Sequence[Any]) -> None:
        for sink in self.sinks:
            sink.log_alerts(alerts)

    def log_sft(self, step: int, metrics: dict[str, float]) -> None:
        for sink in self.sinks:
            sink.log_sft(step, metrics)

    def log_phase(self, phase: Phase) -> None:
        for sink in self.sinks:
            sink.log_phase(phase)

    def close(self) -> None:
        for sink in self.sinks:
            sink.close()


def read_jsonl(path: str | Path) -> list[dict[str, Any]]:
    """Read back one of a run directory's JSONL files (an absent file is an empty list)."""
    path = Path(path)
    if not path.exists():
        return []
    return [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines() if line.strip()]
