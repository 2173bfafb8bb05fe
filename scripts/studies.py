"""Seeded studies on the multi-turn recipe, for docs/experiments/'s tables: `python -m scripts.studies`.

estimators: per seed one SFT policy, then RL from a fresh copy of it with each estimator; held-out
success at T=1 and greedy, the rise over SFT, the area under the training success curve and GiGPO's
anchor groups per step, as mean [min, max] over seeds.

starpo_s: per seed one SFT policy, then GRPO with no KL while the learning rate climbs until the policy
falls apart, once without a filter (StarPO) and once keeping the groups of highest reward std
(StarPO-S); the step at which each run collapsed and the echo-trap detector's first alert.
"""

from __future__ import annotations

import argparse
import json
import statistics
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass, replace
from pathlib import Path
from typing import Any

from trainers.demo.games import multiturn_recipe
from trainers.demo.multiturn import Game, MultiTurnReport, MultiTurnSettings, multiturn_rl, multiturn_sft

T1, GREEDY = "sampled/accuracy", "greedy/accuracy"
COLLAPSE_FRACTION = 0.5  # collapsed: smoothed training success stays at or below half of its best
SMOOTHING = 3  # steps in the rolling mean that judges a collapse


def spread(values: Sequence[float]) -> str:
    """'mean [min, max]' of per-seed values."""
    return f"{statistics.fmean(values):.3f} [{min(values):.3f}, {max(values):.3f}]"


# --- estimators ------------------------------------------------------------------------------------
def compare_estimators(
    game: Game, settings: MultiTurnSettings, seeds: Sequence[int], estimators: Sequence[str], out: Path
) -> dict[str, list[MultiTurnReport]]:
    """Each seed's SFT policy trained by every estimator in the same budget."""
    reports: dict[str, list[MultiTurnReport]] = {name: [] for name in estimators}
    for seed in seeds:
        seeded = replace(settings, seed=seed)
        sft = multiturn_sft(game, seeded, out / f"seed{seed}")
        for name in estimators:
            arm = replace(seeded, estimator=name)
            reports[name].append(multiturn_rl(game, arm, sft.fresh(), out / f"seed{seed}"))
    return reports


def estimator_table(reports: dict[str, list[MultiTurnReport]]) -> str:
    """Markdown: the SFT policy's column, then one per estimator; per-seed rises and times below."""
    first, names = next(iter(reports.values())), list(reports)
    rows: list[tuple[str, str | None, Callable[[MultiTurnReport], float]]] = [
        ("success at T=1", T1, lambda r: r.after[T1]),
        ("rise over SFT at T=1", None, lambda r: r.after[T1] - r.before[T1]),
        ("greedy success", GREEDY, lambda r: r.after[GREEDY]),
        ("AUC of training success", None, lambda r: statistics.fmean(r.curve)),
        ("anchor groups per step", None, lambda r: statistics.fmean(r.anchor_groups or [0.0])),
    ]
    lines = ["| held-out | after SFT | " + " | ".join(names) + " |", "|---" * (len(names) + 2) + "|"]
    for label, before_key, value in rows:
        sft = spread([r.before[before_key] for r in first]) if before_key else ""
        lines.append(
            f"| {label} | {sft} | " + " | ".join(spread([value(r) for r in reports[n]]) for n in names) + " |"
        )
    rises = "; ".join(
        f"{n} " + ", ".join(f"{r.after[T1] - r.before[T1]:+.3f}" for r in reports[n]) for n in names
    )
    times = "; ".join(f"{n}: SFT {mean_of(reports[n], 'sft_seconds'):.0f} s + RL "
                      f"{mean_of(reports[n], 'rl_seconds'):.0f} s" for n in names)  # fmt: skip
    return "\n".join(lines) + f"\n\nper-seed rise at T=1: {rises}\nmean training time: {times}"


def mean_of(reports: list[MultiTurnReport], attribute: str) -> float:
    return statistics.fmean(getattr(r, attribute) for r in reports)


# --- StarPO-S against StarPO at a collapsing learning rate -----------------------------------------
@dataclass
class CollapseRun:
    arm: str
    seed: int
    curve: list[float]
    collapsed_at: int | None  # first RL step (1-based) judged collapsed; None: it never collapsed
    first_alert: int | None  # the echo-trap detector's first alert step; None: no alert
    alert_rule: str | None


def collapse_step(curve: Sequence[float]) -> int | None:
    """The step from which the rolling mean of training success stays at or below COLLAPSE_FRACTION of
    its best before that step, to the end of the run (a dip it recovers from is no collapse)."""
    means = [statistics.fmean(curve[end - SMOOTHING : end]) for end in range(SMOOTHING, len(curve) + 1)]
    for i in range(1, len(means)):
        best = max(means[:i])
        if best > 0 and all(m <= COLLAPSE_FRACTION * best for m in means[i:]):
            return i + SMOOTHING  # the 1-based step that ends window i
    return None


def collapse_overrides(lr: float, warmup_steps: int, keep_fraction: float | None) -> dict[str, Any]:
    """GRPO, no KL, the rate climbing lr / warmup_steps per step; StarPO-S keeps the top groups by std."""
    filters = [] if keep_fraction is None else [{"name": "starpo_s", "keep_fraction": keep_fraction}]
    return {
        "algorithm": {"estimator": "grpo"},
        "loss": {"kl": "none", "kl_coef": 0.0},
        "optimizer": {"lr": lr, "warmup_steps": warmup_steps},
        "filters": filters,
        "echo_trap": {"enabled": True, "on_alert": "record"},
    }


def compare_filtering(
    game: Game, settings: MultiTurnSettings, seeds: Sequence[int], out: Path, *,
    lr: float, warmup_steps: int, keep_fraction: float, same_update_batch: bool = False,
) -> list[CollapseRun]:  # fmt: skip
    """Per seed: one SFT policy, then StarPO and StarPO-S under the same climbing learning rate.
    `same_update_batch`: StarPO-S rolls out 1/keep_fraction times the prompts, so that both arms update
    on as many groups (RAGEN filters a larger rollout pool; otherwise StarPO-S updates on fewer plays)."""
    runs = []
    arms = {"starpo": None, "starpo_s": keep_fraction}
    for seed in seeds:
        seeded = replace(settings, seed=seed, estimator="grpo")
        sft = multiturn_sft(game, seeded, out / f"seed{seed}")
        for arm, keep in arms.items():
            overrides = collapse_overrides(lr, warmup_steps, keep)
            report = multiturn_rl(
                game, rollout_pool(seeded, keep, same_update_batch), sft.fresh(), out / f"seed{seed}",
                name=arm, overrides=overrides,
            )  # fmt: skip
            alert = first_alert(out / f"seed{seed}" / arm / "alerts.jsonl")
            runs.append(CollapseRun(arm, seed, report.curve, collapse_step(report.curve), *alert))
    return runs


def rollout_pool(
    settings: MultiTurnSettings, keep: float | None, same_update_batch: bool
) -> MultiTurnSettings:
    """The arm's settings: with `same_update_batch`, a filtered arm rolls out prompts_per_step / keep prompts,
    so that it keeps as many groups as the unfiltered arm updates on."""
    if keep is None or not same_update_batch:
        return settings
    return replace(settings, prompts_per_step=round(settings.prompts_per_step / keep))


def first_alert(path: Path) -> tuple[int | None, str | None]:
    lines = path.read_text(encoding="utf-8").splitlines() if path.exists() else []
    if not lines:
        return None, None
    alert = json.loads(lines[0])["alert"]
    return int(alert["step"]), str(alert["rule"])


def filtering_table(runs: list[CollapseRun]) -> str:
    lines = ["| seed | arm | collapsed at step | first alert (rule) | training success by step |",
             "|---|---|---|---|---|"]  # fmt: skip
    for run in runs:
        alert = "none" if run.first_alert is None else f"{run.first_alert} ({run.alert_rule})"
        curve = " ".join(f"{x:.2f}" for x in run.curve)
        lines.append(f"| {run.seed} | {run.arm} | {run.collapsed_at or 'never'} | {alert} | {curve} |")
    return "\n".join(lines)


# --- command line ----------------------------------------------------------------------------------
def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m scripts.studies", description=__doc__)
    parser.add_argument("study", choices=["estimators", "starpo_s"])
    parser.add_argument("--env", choices=["frozenlake", "sokoban"], default="frozenlake")
    parser.add_argument("--size", type=int, default=4, help="FrozenLake's side")
    parser.add_argument("--seeds", type=int, nargs="+", default=[0, 1, 2])
    parser.add_argument("--estimators", nargs="+", default=["grpo", "gigpo"])
    parser.add_argument("--lr", type=float, default=1e-2, help="starpo_s: the rate the warm-up climbs to")
    parser.add_argument("--warmup-steps", type=int, default=40, help="starpo_s: steps of the climb")
    parser.add_argument("--keep-fraction", type=float, default=0.25, help="starpo_s: share of groups kept")
    parser.add_argument("--same-update-batch", action="store_true",
                        help="starpo_s: roll out prompts_per_step / keep-fraction prompts")  # fmt: skip
    parser.add_argument("--set", action="append", default=[], metavar="FIELD=VALUE",
                        help="a MultiTurnSettings field, e.g. rl_steps=30 (JSON values)")  # fmt: skip
    parser.add_argument("--grid-only", action="store_true",
                        help="observations without the surroundings line (RAGEN's grid alone)")  # fmt: skip
    parser.add_argument("--out", default="runs/studies")
    args = parser.parse_args(argv)
    try:  # a --set that is not FIELD=JSON, an unknown field (TypeError), an impossible setting
        fields = parsed_fields(args.set)
        game, settings = multiturn_recipe(args.env, args.size, describe=not args.grid_only, **fields)
    except (ValueError, TypeError) as exc:
        parser.error(str(exc))
    view = "-grid" if args.grid_only else ""
    out = Path(args.out) / f"{args.study}-{args.env}{args.size}{view}"
    if args.study == "estimators":
        table = estimator_table(compare_estimators(game, settings, args.seeds, args.estimators, out))
    else:
        runs = compare_filtering(game, settings, args.seeds, out, lr=args.lr, warmup_steps=args.warmup_steps,
                                 keep_fraction=args.keep_fraction,
                                 same_update_batch=args.same_update_batch)  # fmt: skip
        (out / "runs.json").write_text(json.dumps([asdict(r) for r in runs], indent=2), encoding="utf-8")
        table = filtering_table(runs)
    print(table)
    (out / "table.md").write_text(table + "\n", encoding="utf-8")
    return 0


def parsed_fields(items: list[str]) -> dict[str, Any]:
    """`--set FIELD=VALUE` items as settings (VALUE is JSON); ValueError names an item that is not."""
    fields = {}
    for item in items:
        name, equals, value = item.partition("=")
        try:
            if not (name and equals):
                raise ValueError(item)
            fields[name] = json.loads(value)
        except ValueError:
            raise ValueError(f"--set {item!r}: expected FIELD=VALUE, VALUE in JSON (rl_steps=30)") from None
    return fields


if __name__ == "__main__":
    raise SystemExit(main())
