"""RAGEN echo-trap detector (arXiv 2504.20073, sec. 4.1): rules over the metric stream.

The collapse's signature: within-group reward std falls off a cliff and entropy drops while reward
stagnates or falls, with gradient-norm spikes. A healthy run also sharpens (entropy and group std
fall), but while reward rises towards its best; so the std and entropy rules are gated on reward.
Rules: `std_collapse` (smoothed std below a fraction of its running peak), `entropy_drop` (smoothed
entropy below a fraction of its peak or early level), both only while smoothed reward has gained at
most `reward_tolerance` (and `reward_tolerance_rel` of its size) since the rule's reference step;
`grad_spike` (grad norm above a multiple of its rolling median), reported only within
`coincidence_window` steps of a std or entropy signal unless `isolated_grad_spikes`; `reward_fall`
(smoothed reward lost half of its best, and at least `reward_fall_min`: a run falling apart, which a
policy whose entropy was already low does without the std and entropy signs); and `echo_trap` when
the std collapse coincides with an entropy drop or a grad spike within `coincidence_window` steps.
Apart from the trap, `no_signal`: at least `no_signal_frac` of the groups had equal rewards on each of
`no_signal_steps` steps in a row, so their advantages were zero and the update learnt nothing from them,
while smoothed reward has gained at most `reward_tolerance` since the run's first steps (a policy that
learned until its groups agree has converged; one that never learned, or lost it all, is stuck).
Each rule fires when its condition becomes true and re-arms when it is false again. Every message
quotes the numbers, then says in plain words what they mean.
"""

from __future__ import annotations

import math
import statistics
from collections.abc import Mapping
from dataclasses import asdict, dataclass, field, fields
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field

from trainers.metrics import keys

Severity = Literal["info", "warning", "critical"]


class EchoTrapConfig(BaseModel):
    model_config = ConfigDict(extra="forbid")

    std_key: str = Field(keys.REWARD_GROUP_STD_MEAN, description="series of within-group reward std")
    entropy_key: str = Field(keys.LOSS_ENTROPY, description="series of policy entropy")
    grad_norm_key: str = Field(keys.LOSS_GRAD_NORM, description="series of gradient norm")
    reward_key: str = Field(keys.REWARD_MEAN, description="reward series, quoted in the evidence")
    zero_variance_key: str = Field(
        keys.REWARD_ZERO_VARIANCE_FRAC, description="series of the fraction of groups with equal rewards"
    )
    warmup_steps: int = Field(5, ge=1, description="points a series needs before its rule may fire")
    smoothing: int = Field(3, ge=1, description="rolling-mean window applied to std and entropy")
    std_collapse_ratio: float = Field(0.3, gt=0, lt=1, description="alert when std < ratio * running peak")
    std_min_peak: float = Field(1e-3, ge=0, description="ignore std collapse if the peak never exceeded this")
    entropy_drop_ratio: float = Field(0.5, gt=0, lt=1, description="alert when entropy < ratio * reference")
    entropy_reference: Literal["peak", "early"] = Field("peak", description="peak or mean of the early steps")
    early_steps: int = Field(5, ge=1, description="points averaged for the 'early' entropy reference")
    grad_spike_factor: float = Field(5.0, gt=1, description="alert when grad norm > factor * rolling median")
    grad_window: int = Field(20, ge=2, description="past points in the grad norm rolling median")
    coincidence_window: int = Field(10, ge=0, description="steps within which signals count as coinciding")
    reward_tolerance: float = Field(
        0.05,
        ge=0,
        description="std/entropy rules alert only if smoothed reward gained at most this since their"
        " reference step: sharpening while reward rises is convergence, not the trap",
    )
    reward_tolerance_rel: float = Field(
        0.25,
        ge=0,
        description="and at most this fraction of the reward's size at the reference step: on small"
        " rewards a small gain is real learning (0.10 -> 0.15 while a fresh policy sharpens)",
    )
    reward_fall: float = Field(
        0.5, gt=0, lt=1, description="alert when smoothed reward fell by this fraction of its best"
    )
    reward_fall_min: float = Field(
        0.1,
        ge=0,
        description="the least fall of smoothed reward that alerts, in reward units: noise on small"
        " rewards is not a fall",
    )
    no_signal_frac: float = Field(
        0.8, gt=0, le=1, description="alert when at least this fraction of groups had equal rewards"
    )
    no_signal_steps: int = Field(5, ge=1, description="... on this many steps in a row")
    isolated_grad_spikes: bool = Field(
        False,
        description="also alert on grad spikes with no std or entropy signal near (small batches spike)",
    )


@dataclass
class Alert:
    step: int  # where the rule fired
    rule: str  # std_collapse | entropy_drop | reward_fall | grad_spike | echo_trap | no_signal
    severity: Severity
    message: str  # the evidence in words, numbers included
    evidence: dict[str, float] = field(default_factory=dict)
    start_step: int | None = None  # where the shaded region on the charts begins (e.g. the peak)

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> Alert:
        """Inverse of `to_dict`; fields missing from `data` (saved before they existed) take their default."""
        known = {f.name for f in fields(cls)}
        alert = cls(**{k: v for k, v in data.items() if k in known})
        alert.evidence = dict(alert.evidence)
        return alert


@dataclass
class _Series:
    """One metric's history with its smoothed running peak."""

    points: list[tuple[int, float]] = field(default_factory=list)
    smoothed: list[float] = field(default_factory=list)
    peak: float = -math.inf
    peak_step: int = 0

    def add(self, step: int, value: float, window: int) -> None:
        self.points.append((step, value))
        recent = [v for _, v in self.points[-window:]]
        self.smoothed.append(sum(recent) / len(recent))
        if self.smoothed[-1] > self.peak:
            self.peak, self.peak_step = self.smoothed[-1], step

    def state_dict(self) -> dict[str, Any]:
        return {"points": [[s, v] for s, v in self.points], "smoothed": list(self.smoothed),
                "peak": self.peak, "peak_step": self.peak_step}  # fmt: skip

    @classmethod
    def from_state(cls, state: Mapping[str, Any]) -> _Series:
        series = cls()
        series.points = [(int(s), float(v)) for s, v in state.get("points", [])]
        series.smoothed = [float(v) for v in state.get("smoothed", [])]
        series.peak = float(state.get("peak", series.peak))
        series.peak_step = int(state.get("peak_step", series.peak_step))
        return series

    def smoothed_at(self, step: int) -> float:
        """The smoothed value at the last point on or before `step` (the first point if none is)."""
        index = max(0, sum(1 for s, _ in self.points if s <= step) - 1)
        return self.smoothed[index]


class EchoTrapDetector:
    """Streaming: call `update(step, metrics)` once per step; `detect(series)` replays stored series."""

    def __init__(self, config: EchoTrapConfig | None = None) -> None:
        self.config = config or EchoTrapConfig()
        self.series: dict[str, _Series] = {}
        self.active: dict[str, bool] = {}
        self.last_fired: dict[str, int] = {}
        self.latest: dict[str, Alert] = {}
        self.spike: Alert | None = None  # the latest grad spike, reported or not: an echo-trap partner

    def update(self, step: int, metrics: Mapping[str, float]) -> list[Alert]:
        """Add this step's points; a rule is judged only when its own series got a new point."""
        cfg = self.config
        fresh = set()
        for key in (cfg.std_key, cfg.entropy_key, cfg.grad_norm_key, cfg.reward_key, cfg.zero_variance_key):
            value = metrics.get(key)
            if value is not None and math.isfinite(value):
                self.series.setdefault(key, _Series()).add(step, float(value), cfg.smoothing)
                fresh.add(key)
        alerts = []
        for rule, key, check in (
            ("std_collapse", cfg.std_key, self._std_collapse),
            ("entropy_drop", cfg.entropy_key, self._entropy_drop),
            ("reward_fall", cfg.reward_key, self._reward_fall),
            ("no_signal", cfg.zero_variance_key, self._no_signal),
        ):
            if key in fresh:
                alerts += self._transition(rule, step, check(step, self.series[key]))
        if cfg.grad_norm_key in fresh:
            spike = self._grad_spike(step, self.series[cfg.grad_norm_key])
            self.spike = spike or self.spike
            reported = cfg.isolated_grad_spikes or self._near(step, ("std_collapse", "entropy_drop"))
            alerts += self._transition("grad_spike", step, spike if reported else None)
        alerts += self._transition("echo_trap", step, self._echo_trap(step))
        return alerts

    def state_dict(self) -> dict[str, Any]:
        """The streaming state as plain data (lists, dicts, numbers, strings), for checkpoints loaded with
        `weights_only=True`. The config is not part of it: a resumed run uses the config it is given."""
        return {
            "series": {key: s.state_dict() for key, s in self.series.items()},
            "active": dict(self.active),
            "last_fired": dict(self.last_fired),
            "latest": {rule: alert.to_dict() for rule, alert in self.latest.items()},
            "spike": self.spike.to_dict() if self.spike is not None else None,
        }

    def load_state_dict(self, state: Mapping[str, Any]) -> None:
        """Restore `state_dict()`; an entry the state lacks (saved by an older version) keeps its default."""
        self.__init__(self.config)  # every attribute at its default first
        self.series = {k: _Series.from_state(v) for k, v in state.get("series", {}).items()}
        self.active = {k: bool(v) for k, v in state.get("active", {}).items()}
        self.last_fired = {k: int(v) for k, v in state.get("last_fired", {}).items()}
        self.latest = {k: Alert.from_dict(v) for k, v in state.get("latest", {}).items()}
        spike = state.get("spike")
        self.spike = Alert.from_dict(spike) if spike is not None else None

    def detect(self, series: Mapping[str, list[tuple[int, float]]]) -> list[Alert]:
        """Batch mode: replay series {key: [(step, value), ...]} through a fresh detector."""
        fresh = EchoTrapDetector(self.config)
        by_step: dict[int, dict[str, float]] = {}
        for key, points in series.items():
            for step, value in points:
                by_step.setdefault(int(step), {})[key] = value
        return [alert for step in sorted(by_step) for alert in fresh.update(step, by_step[step])]

    # --- rules: each returns an Alert while its condition holds, else None -----------------------
    def _std_collapse(self, step: int, s: _Series) -> Alert | None:
        cfg = self.config
        if len(s.points) < cfg.warmup_steps or s.peak < cfg.std_min_peak:
            return None
        value = s.smoothed[-1]
        if value >= cfg.std_collapse_ratio * s.peak:
            return None
        reward = self._reward_since(s.peak_step)
        if reward is None:
            return None
        fraction = value / s.peak
        evidence = {"value": value, "peak": s.peak, "peak_step": s.peak_step, "fraction_of_peak": fraction}
        evidence.update(reward)
        message = (
            f"Within-group reward std fell to {fraction:.0%} of its peak, from {s.peak:.3g} at step "
            f"{s.peak_step} to {value:.3g} at step {step}{_while_reward(reward, s.peak_step, step)}: the "
            "samples of a prompt are growing alike without scoring better, so GRPO has less to compare"
            " (the echo trap's first sign)."
        )
        return Alert(step, "std_collapse", "warning", message, evidence, s.peak_step)

    def _entropy_drop(self, step: int, s: _Series) -> Alert | None:
        cfg = self.config
        if len(s.points) < max(cfg.warmup_steps, cfg.early_steps):
            return None
        if cfg.entropy_reference == "peak":
            reference, ref_step, reward_step = s.peak, s.peak_step, s.peak_step
        else:
            early = [v for _, v in s.points[: cfg.early_steps]]
            reference, ref_step = sum(early) / len(early), s.points[0][0]
            reward_step = s.points[cfg.early_steps - 1][0]
        value = s.smoothed[-1]
        if reference <= 0 or value >= cfg.entropy_drop_ratio * reference:
            return None
        reward = self._reward_since(reward_step)
        if reward is None:
            return None
        drop = 1.0 - value / reference
        evidence = {"value": value, "reference": reference, "drop": drop, **reward}
        message = (
            f"Policy entropy fell {drop:.0%}, from {reference:.3g} at step {ref_step} to {value:.3g} at step "
            f"{step}{_while_reward(reward, reward_step, step)}: the policy is growing sure of its answers"
            " without them scoring better, so it explores less."
        )
        return Alert(step, "entropy_drop", "warning", message, evidence, ref_step)

    def _reward_fall(self, step: int, s: _Series) -> Alert | None:
        cfg = self.config
        if len(s.points) < cfg.warmup_steps:
            return None
        value, fall = s.smoothed[-1], s.peak - s.smoothed[-1]
        if fall < max(cfg.reward_fall_min, cfg.reward_fall * abs(s.peak)):
            return None
        evidence = {"value": value, "peak": s.peak, "peak_step": s.peak_step, "fall": fall}
        message = (
            f"Reward mean fell from its best {s.peak:.3g} at step {s.peak_step} to {value:.3g} at step {step}"
            f" ({_steps(step - s.peak_step)}, smoothed over {cfg.smoothing}): the policy is getting worse at"
            " the task; the checkpoint near its best step may be the one to keep."
        )
        return Alert(step, "reward_fall", "warning", message, evidence, s.peak_step)

    def _no_signal(self, step: int, s: _Series) -> Alert | None:
        cfg = self.config
        recent = s.points[-cfg.no_signal_steps :]
        if len(recent) < cfg.no_signal_steps or any(v < cfg.no_signal_frac for _, v in recent):
            return None
        reward = self.series.get(cfg.reward_key)
        start = reward.smoothed[min(cfg.smoothing, len(reward.smoothed)) - 1] if reward is not None else None
        if reward is not None and reward.smoothed[-1] - start > cfg.reward_tolerance:
            return None  # it learned: its groups agree because it got good, not because it is stuck
        first, least = recent[0][0], min(v for _, v in recent)
        evidence = {"zero_variance_frac": least, "steps": float(len(recent))}
        groups = "Every group" if least >= 1 else f"{least:.0%} or more of the groups"
        message = (
            f"{groups} had equal rewards on every step from {first} to {step}: their advantages are"
            " zero, so the policy learns nothing from them."
        )
        if reward is not None:
            evidence["reward_mean"] = mean = reward.points[-1][1]
            message += (
                f" Reward mean is {mean:.3g}: if every sample fails, the task is too hard for the model or"
                " the reward never fires; if every sample succeeds, nothing is left to learn."
            )
        return Alert(step, "no_signal", "warning", message, evidence, first)

    def _grad_spike(self, step: int, s: _Series) -> Alert | None:
        cfg = self.config
        history = [v for _, v in s.points[-cfg.grad_window - 1 : -1]]
        if len(history) < cfg.warmup_steps:
            return None
        median, value = statistics.median(history), s.points[-1][1]
        if median <= 0 or value <= cfg.grad_spike_factor * median:
            return None
        evidence = {"value": value, "median": median, "factor": value / median}
        message = (
            f"Gradient norm spiked to {value:.3g} at step {step}, {value / median:.1f}x its recent median"
            f" {median:.3g}: one update was far larger than usual, which can knock the policy off course."
        )
        return Alert(step, "grad_spike", "warning", message, evidence, step)

    def _reward_since(self, ref_step: int) -> dict[str, float] | None:
        """Smoothed reward now and at the reference step; None when it gained more than the tolerance
        (the policy sharpened because it got better); empty when no reward is logged (rules ungated)."""
        reward = self.series.get(self.config.reward_key)
        if reward is None:
            return {}
        now, then = reward.smoothed[-1], reward.smoothed_at(ref_step)
        if now - then > min(self.config.reward_tolerance, self.config.reward_tolerance_rel * abs(then)):
            return None
        return {"reward_mean": now, "reward_at_reference": then}

    def _echo_trap(self, step: int) -> Alert | None:
        if not self.active.get("std_collapse"):
            return None
        window = self.config.coincidence_window
        partners = {rule: self.latest[rule] for rule in ("entropy_drop",) if self._near(step, (rule,))}
        if self.spike is not None and step - self.spike.step <= window:
            partners["grad_spike"] = self.spike
        if not partners:
            return None
        collapse = self.latest["std_collapse"]
        parts = [collapse.message] + [alert.message for alert in partners.values()]
        evidence = {f"std_{k}": v for k, v in collapse.evidence.items()}
        for rule, alert in partners.items():
            evidence.update({f"{rule}_{k}": v for k, v in alert.evidence.items()})
        message = (
            "Echo trap: the policy is collapsing onto a few repeated answers that no longer improve"
            " (RAGEN). " + " ".join(parts)
        )
        return Alert(step, "echo_trap", "critical", message, evidence, collapse.start_step)

    # --- bookkeeping ------------------------------------------------------------------------------
    def _near(self, step: int, rules: tuple[str, ...]) -> bool:
        """Whether any of the rules holds now or fired within `coincidence_window` steps."""
        window = self.config.coincidence_window
        return any(
            self.active.get(rule) or step - self.last_fired.get(rule, -math.inf) <= window for rule in rules
        )

    def _transition(self, rule: str, step: int, alert: Alert | None) -> list[Alert]:
        """Fire on the step a condition becomes true; keep the latest evidence while it holds."""
        was_active = self.active.get(rule, False)
        self.active[rule] = alert is not None
        if alert is None:
            return []
        self.latest[rule] = alert
        if was_active:
            return []
        self.last_fired[rule] = step
        return [alert]


def _steps(count: int) -> str:
    return f"{count} step" if count == 1 else f"{count} steps"


def _while_reward(reward: Mapping[str, float], ref_step: int, step: int) -> str:
    """How smoothed reward moved between the rule's reference step and now, as a clause; empty without it."""
    if not reward:
        return ""
    then, now = reward["reward_at_reference"], reward["reward_mean"]
    over = _steps(step - ref_step)
    if round(then, 3) == round(now, 3):
        return f", while reward mean stayed at {now:.3g} over {over}"
    verb = "rose" if now > then else "fell"
    return f", while reward mean {verb} from {then:.3g} to {now:.3g} over {over}"
