"""LIMR's data filter (arXiv 2502.11886), which ToRL trained on (arXiv 2503.23383: 75,149 -> 28,740 problems).

Learning Impact Measurement: a short RL probe over the whole dataset records each prompt's reward at
each epoch, r_i^k (the mean of its samples' rewards, each scaled to [0, 1], at its k-th visit). The
average curve is r_avg^k = mean_i r_i^k, and a prompt scores by how closely its own curve follows the
model's learning curve:

    s_i = 1 - sum_k (r_i^k - r_avg^k)^2 / sum_k (1 - r_avg^k)^2

Prompts the model always or never solves (flat curves) score low; prompts it learns along with the
rest score close to 1. Prompts with s_i >= threshold are kept (the paper's threshold is 0.6; `>=` as
in the authors' `lim_selection.py`).

`limr_scores` is the pure scoring; `run_probe` trains a throw-away copy of the run (`run_config`,
so an SFT stage runs first as in the real run) recording per-prompt rewards from the trajectories it
logs; `limr_filter` probes, scores and writes the kept rows. `python -m trainers limr CONFIG`.
"""

from __future__ import annotations

import json
import math
import shutil
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from trainers.training.sinks import MultiSink, NullSink, RunDirSink
from trainers.trajectory import Trajectory

DEFAULT_THRESHOLD = 0.6


# --- the scoring (pure) ----------------------------------------------------------------------------
def average_curve(curves: Mapping[str, Sequence[float]]) -> list[float]:
    """r_avg^k: the mean over prompts of their reward at epoch k (all curves have the same length)."""
    if not curves:
        raise ValueError("no reward curves to average")
    lengths = {len(c) for c in curves.values()}
    if len(lengths) != 1 or 0 in lengths:
        raise ValueError(
            f"every curve needs the same, non-zero number of epochs; got lengths {sorted(lengths)}"
        )
    (epochs,) = lengths
    return [sum(c[k] for c in curves.values()) / len(curves) for k in range(epochs)]


def lim_score(curve: Sequence[float], average: Sequence[float]) -> float:
    """s = 1 - sum_k (r^k - r_avg^k)^2 / sum_k (1 - r_avg^k)^2; at most 1 (1 = on the average curve).

    When the average is 1 at every epoch (every prompt always solved) every curve equals it: 1.0.
    """
    if len(curve) != len(average):
        raise ValueError("the curve and the average curve need the same number of epochs")
    spread = sum((r - a) ** 2 for r, a in zip(curve, average, strict=True))
    room = sum((1.0 - a) ** 2 for a in average)
    return 1.0 - spread / room if room > 0 else 1.0


def limr_scores(curves: Mapping[str, Sequence[float]]) -> dict[str, float]:
    """Each prompt's LIM score from its per-epoch rewards, which must lie in [0, 1] (scale them first)."""
    for key, curve in curves.items():
        if any(not 0.0 <= r <= 1.0 for r in curve):
            raise ValueError(f"rewards of {key!r} must be scaled to [0, 1], got {list(curve)}")
    average = average_curve(curves)
    return {key: lim_score(curve, average) for key, curve in curves.items()}


def select(scores: Mapping[str, float], threshold: float = DEFAULT_THRESHOLD) -> list[str]:
    """The prompts whose score reaches the threshold, in the scores' order."""
    return [key for key, score in scores.items() if score >= threshold]


def scale(reward: float, low: float, high: float) -> float:
    """A reward mapped from [low, high] onto [0, 1], clipped (ToRL's -1.5/-1/+1 -> 0/0/1 with 0..1)."""
    if high <= low:
        raise ValueError(f"the reward range needs low < high, got {low}, {high}")
    return min(1.0, max(0.0, (reward - low) / (high - low)))


def epoch_curves(
    visits: Mapping[str, Sequence[float]], row_ids: Sequence[str]
) -> tuple[dict[str, list[float]], int]:
    """Per-epoch curves from each row's visit rewards (in visit order): the k-th visit of a row is its
    epoch k (the prompt sampler deals every row once per epoch). All rows are cut to the epochs
    every row completed; a row never visited means the probe was too short."""
    missing = [row_id for row_id in row_ids if not visits.get(row_id)]
    if missing:
        raise ValueError(
            f"the probe never sampled {len(missing)} of {len(row_ids)} prompts (e.g. {missing[0]!r}): "
            "run it for at least one epoch (more steps, or fewer rows)"
        )
    epochs = min(len(visits[row_id]) for row_id in row_ids)
    return {row_id: list(visits[row_id][:epochs]) for row_id in row_ids}, epochs


# --- the probe -------------------------------------------------------------------------------------
def row_id_of(group_id: str) -> str:
    """The dataset row id in a training group id: the loop writes `{step}.{round}.{index}:{row id}`."""
    return group_id.split(":", 1)[1] if ":" in group_id else group_id


class RewardRecorder(NullSink):
    """Keeps each logged group's rewards by dataset row: `visits[row_id]` = [rewards of visit 1, ...]."""

    def __init__(self, component: str | None = None) -> None:
        self.component = component  # None: the weighted total reward
        self.groups: dict[str, list[float]] = {}  # group id -> rewards of its samples, in logging order

    def value(self, trajectory: Trajectory) -> float:
        if self.component is None:
            return trajectory.reward
        if self.component not in trajectory.rewards:
            known = ", ".join(sorted(trajectory.rewards)) or "none"
            raise ValueError(f"no reward {self.component!r} on the trajectories; recorded: {known}")
        return trajectory.rewards[self.component]

    def log_trajectories(self, step: int, trajectories: Sequence[Trajectory]) -> None:
        for trajectory in trajectories:
            self.groups.setdefault(trajectory.group_id, []).append(self.value(trajectory))

    def visits(self) -> dict[str, list[list[float]]]:
        out: dict[str, list[list[float]]] = {}
        for group_id, rewards in self.groups.items():
            out.setdefault(row_id_of(group_id), []).append(rewards)
        return out


def read_raw_rows(path: str | Path) -> list[tuple[str, dict[str, Any]]]:
    """(row id, row as written) for each row of a JSONL file, ids given the way `read_rows` gives them."""
    rows = []
    for number, line in enumerate(Path(path).read_text(encoding="utf-8").splitlines(), start=1):
        if line.strip():
            row = json.loads(line)
            rows.append((str(row.get("id", f"row{number}")), row))
    ids = [row_id for row_id, _ in rows]
    if len(set(ids)) != len(ids):
        raise ValueError(f"{path}: row ids must be unique to score rows separately")
    return rows


def probe_config(config: Any, *, steps: int, probe_dir: str | Path) -> Any:
    """The run's config as a probe: `steps` steps over every training row into `probe_dir`, no held-out
    split and no evaluation, an echo-trap alert only recorded, a checkpoint only at the end."""
    from trainers.config.loader import validate_config

    data = config.model_dump(mode="json")
    data["output_dir"] = str(probe_dir)
    data["training"]["steps"] = steps
    data["data"].update(eval_path=None, eval_fraction=0.0)
    data["echo_trap"]["on_alert"] = "record"
    data["checkpoint"]["every_steps"] = steps
    return validate_config(data, "LIMR probe config")


def probe_steps_for(rows: int, prompts_per_step: int, epochs: int) -> int:
    """Steps for `epochs` passes over `rows` rows at `prompts_per_step` prompts a step."""
    return math.ceil(epochs * rows / prompts_per_step)


def run_probe(
    config: Any, *, steps: int, probe_dir: str | Path, component: str | None = None
) -> dict[str, list[list[float]]]:
    """Train a throw-away copy of the run for `steps` steps; each training row's sample rewards per
    visit. The probe's metrics stay in `probe_dir`; its checkpoints are deleted (weights are not kept)."""
    from trainers.training.run import run_config

    probe_dir = Path(probe_dir)
    recorder = RewardRecorder(component)
    sink = MultiSink([RunDirSink(probe_dir, trajectories_every=0), recorder])
    run_config(probe_config(config, steps=steps, probe_dir=probe_dir), sink=sink)
    shutil.rmtree(probe_dir / "checkpoints", ignore_errors=True)
    return recorder.visits()


@dataclass
class LimrResult:
    """Scores, curves and the selection of one LIMR filtering."""

    scores: dict[str, float]
    curves: dict[str, list[float]]
    average: list[float]
    threshold: float
    epochs: int
    steps: int
    kept: list[str] = field(default_factory=list)

    def summary(self) -> dict[str, Any]:
        return {
            "prompts": len(self.scores),
            "kept": len(self.kept),
            "threshold": self.threshold,
            "epochs": self.epochs,
            "probe_steps": self.steps,
            "average_curve": [round(a, 4) for a in self.average],
        }

    def to_json(self) -> dict[str, Any]:
        kept = set(self.kept)
        prompts = {
            row_id: {"score": score, "curve": self.curves[row_id], "kept": row_id in kept}
            for row_id, score in self.scores.items()
        }
        return {**self.summary(), "average_curve": self.average, "prompts": prompts}


def score_visits(
    visits: Mapping[str, Sequence[Sequence[float]]],
    row_ids: Sequence[str],
    *,
    threshold: float = DEFAULT_THRESHOLD,
    reward_range: tuple[float, float] = (0.0, 1.0),
    steps: int = 0,
) -> LimrResult:
    """Scale each sample's reward to [0, 1] (with ToRL's +-1 a visit's mean is then LIMR's accuracy),
    average each visit's samples, build per-epoch curves, score and select."""
    low, high = reward_range
    means = {
        row_id: [sum(scale(r, low, high) for r in v) / len(v) for v in row_visits if v]
        for row_id, row_visits in visits.items()
    }
    curves, epochs = epoch_curves(means, row_ids)
    scores = limr_scores(curves)
    kept = select(scores, threshold)
    return LimrResult(scores, curves, average_curve(curves), threshold, epochs, steps, kept)


def limr_filter(
    config: Any,
    out: str | Path,
    *,
    threshold: float = DEFAULT_THRESHOLD,
    steps: int | None = None,
    epochs: int = 3,
    probe_dir: str | Path | None = None,
    reward_range: tuple[float, float] = (0.0, 1.0),
    component: str | None = None,
    scores_path: str | Path | None = None,
) -> LimrResult:
    """Probe the config's training rows, score them and write the kept rows (as written, in file order)
    to `out`, and every row's score and curve to `scores_path` (default: next to the probe's metrics).

    Without `steps`, the probe runs `epochs` passes over the rows.
    """
    if config.data.train_path is None:
        raise ValueError("data.train_path: the config names no training rows to filter")
    keys = [spec.key for spec in config.reward.components]
    if component is not None and component.split("/")[0] not in keys:  # "artist/answer": a sub-score
        raise ValueError(f"--component {component!r} is not a reward component of the run: {keys}")
    rows = read_raw_rows(config.data.train_path)
    if steps is None:
        steps = probe_steps_for(len(rows), config.rollout.prompts_per_step, epochs)
    probe_dir = Path(probe_dir) if probe_dir is not None else Path(f"{config.output_dir}-limr-probe")
    visits = run_probe(config, steps=steps, probe_dir=probe_dir, component=component)
    ids = [row_id for row_id, _ in rows]
    result = score_visits(visits, ids, threshold=threshold, reward_range=reward_range, steps=steps)
    kept = set(result.kept)
    out = Path(out)
    out.parent.mkdir(parents=True, exist_ok=True)
    with out.open("w", encoding="utf-8") as handle:
        for row_id, row in rows:
            if row_id in kept:
                handle.write(json.dumps({"id": row_id, **row}, ensure_ascii=False) + "\n")
    scores_path = Path(scores_path) if scores_path is not None else probe_dir / "limr_scores.json"
    scores_path.write_text(json.dumps(result.to_json(), indent=1), encoding="utf-8")
    return result
