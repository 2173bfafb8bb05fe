"""The multi-turn studies' judgements: when a run collapsed, its first alert, and the tables they print."""

import json

import pytest

from scripts.studies import (
    CollapseRun,
    collapse_overrides,
    collapse_step,
    estimator_table,
    filtering_table,
    first_alert,
    main,
    parsed_fields,
    rollout_pool,
)
from trainers.demo.frozenlake import lake_game
from trainers.demo.multiturn import MultiTurnReport, MultiTurnSettings, success_per_step


def test_a_run_collapses_when_its_smoothed_success_stays_at_half_of_its_best():
    # best rolling mean 0.567 (steps 2-4); from the window of steps 5-7 (0.133) on it stays under half
    assert collapse_step([0.4, 0.5, 0.6, 0.6, 0.3, 0.1, 0.0, 0.0]) == 7
    assert collapse_step([0.4, 0.5, 0.6, 0.1, 0.0, 0.1, 0.5, 0.6, 0.6]) is None  # a dip it recovers from
    assert collapse_step([0.0, 0.0, 0.0, 0.0]) is None  # nothing to fall from
    assert collapse_step([0.5]) is None


def test_the_first_alert_is_read_from_the_run_directory(tmp_path):
    path = tmp_path / "alerts.jsonl"
    assert first_alert(path) == (None, None)
    rows = [{"alert": {"step": 7, "rule": "reward_fall"}}, {"alert": {"step": 9, "rule": "std_collapse"}}]
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    assert first_alert(path) == (7, "reward_fall")


def test_starpo_s_arm_differs_from_starpo_only_by_its_filter():
    plain, filtered = collapse_overrides(1e-2, 40, None), collapse_overrides(1e-2, 40, 0.25)
    assert plain["filters"] == [] and filtered["filters"] == [{"name": "starpo_s", "keep_fraction": 0.25}]
    assert {k: v for k, v in plain.items() if k != "filters"} == {
        k: v for k, v in filtered.items() if k != "filters"
    }


def test_same_update_batch_gives_the_filtered_arm_a_larger_rollout_pool():
    settings = MultiTurnSettings(prompts_per_step=8)
    assert rollout_pool(settings, 0.25, same_update_batch=True).prompts_per_step == 32  # keeps 8 groups
    assert rollout_pool(settings, 0.25, same_update_batch=False).prompts_per_step == 8
    assert rollout_pool(settings, None, same_update_batch=True).prompts_per_step == 8  # StarPO: no filter


def report(before: float, after: float, curve: list[float], anchors: list[float]) -> MultiTurnReport:
    metrics = lambda x: {"sampled/accuracy": x, "greedy/accuracy": x + 0.1}  # noqa: E731
    return MultiTurnReport({}, metrics(before), metrics(after), 60.0, 30.0, curve, anchors)


def test_estimator_table_gives_mean_and_range_over_seeds_with_the_sft_column():
    reports = {
        "grpo": [report(0.2, 0.4, [0.2, 0.4], []), report(0.3, 0.4, [0.3, 0.5], [])],
        "gigpo": [report(0.2, 0.5, [0.2, 0.6], [40, 60]), report(0.3, 0.6, [0.3, 0.7], [50, 50])],
    }
    table = estimator_table(reports).splitlines()
    assert table[0] == "| held-out | after SFT | grpo | gigpo |"
    success = "| success at T=1 | 0.250 [0.200, 0.300] | 0.400 [0.400, 0.400] | 0.550 [0.500, 0.600] |"
    assert table[2] == success
    assert table[3].startswith("| rise over SFT at T=1 |  | 0.150 [0.100, 0.200] | 0.300 [0.300, 0.300]")
    assert "| anchor groups per step |  | 0.000 [0.000, 0.000] | 50.000 [50.000, 50.000] |" in table
    assert "per-seed rise at T=1: grpo +0.200, +0.100; gigpo +0.300, +0.300" in table


def test_filtering_table_names_each_runs_collapse_and_alert():
    runs = [CollapseRun("starpo", 0, [0.5, 0.1], 5, 4, "reward_fall"),
            CollapseRun("starpo_s", 0, [0.5, 0.6], None, None, None)]  # fmt: skip
    lines = filtering_table(runs).splitlines()
    assert lines[2] == "| 0 | starpo | 5 | 4 (reward_fall) | 0.50 0.10 |"
    assert lines[3] == "| 0 | starpo_s | never | none | 0.50 0.60 |"


def test_training_success_per_step_is_read_from_each_plays_last_state(tmp_path):
    def play(step: int, *states: str) -> dict:
        turns = [{"role": "assistant", "state": s} for s in states] + [{"role": "tool", "state": None}]
        return {"step": step, "turns": turns}

    plays = [play(1, "P_\n_G", "__\n_W"), play(1, "P_\n_G"), play(2, "_P\n_G", "__\n_W"), play(2)]
    path = tmp_path / "trajectories.jsonl"
    path.write_text("".join(json.dumps(p) + "\n" for p in plays))
    assert success_per_step(lake_game(), path) == [0.5, 0.5]
    assert success_per_step(lake_game(), tmp_path / "missing.jsonl") == []


@pytest.mark.parametrize(
    ("flags", "message"),
    [(["--set", "rl_steps=abc"], "--set 'rl_steps=abc': expected FIELD=VALUE"),
     (["--set", "rl_steps"], "--set 'rl_steps': expected FIELD=VALUE"),
     (["--set", "bogus=1"], "unexpected keyword argument 'bogus'"),
     (["--set", "rl_steps=0"], "rl_steps must be at least 1, not 0"),
     (["--size", "9"], "FrozenLake's side must be from 3 to 6, not 9")],
)  # fmt: skip
def test_a_study_that_cannot_run_is_a_usage_error_naming_why(flags, message, tmp_path, capsys):
    with pytest.raises(SystemExit) as exited:
        main(["estimators", *flags, "--out", str(tmp_path / "out")])
    assert exited.value.code == 2 and message in capsys.readouterr().err
    assert not (tmp_path / "out").exists()


def test_set_values_are_json():
    assert parsed_fields(["rl_steps=30", "rl_lr=3e-4", "mistake=\"wasted\""]) == {
        "rl_steps": 30, "rl_lr": 3e-4, "mistake": "wasted"}  # fmt: skip
