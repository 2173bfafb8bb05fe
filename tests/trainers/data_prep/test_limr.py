"""LIMR (arXiv 2502.11886): the Learning Impact Measurement by hand, and the probe on the tiny model."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from trainers.cli import main
from trainers.config.loader import validate_config
from trainers.data_prep.limr import (
    average_curve,
    epoch_curves,
    limr_filter,
    limr_scores,
    row_id_of,
    scale,
    score_visits,
    select,
)
from trainers.demo.arithmetic import make_splits, write_rows
from trainers.models.tiny import build_tiny_model
from trainers.rewards import REWARDS, RewardComponent
from trainers.rewards.base import assistant_text

# --- the score, hand-computed ----------------------------------------------------------------------
# avg = [0.25, 0.75]; room = (1 - 0.25)^2 + (1 - 0.75)^2 = 0.625
# learns [0, 1]: spread 0.0625 + 0.0625 = 0.125 -> 1 - 0.2 = 0.8; never/always: spread 0.625 -> 0
CURVES = {"learns": [0.0, 1.0], "never": [0.0, 0.0], "always": [1.0, 1.0], "learns_too": [0.0, 1.0]}


def test_average_curve_is_the_mean_per_epoch():
    assert average_curve(CURVES) == [0.25, 0.75]


def test_scores_match_the_hand_computed_values():
    scores = limr_scores(CURVES)
    assert scores == pytest.approx({"learns": 0.8, "never": 0.0, "always": 0.0, "learns_too": 0.8})
    assert select(scores, 0.6) == ["learns", "learns_too"]
    assert select(scores, 0.0) == list(CURVES)  # >=, as the authors' selection script


def test_a_three_epoch_example():
    # avg = [0.2, 0.4, 0.6]; room = 0.64 + 0.36 + 0.16 = 1.16
    curves = {"a": [0.0, 0.5, 1.0], "b": [0.2, 0.2, 0.2], "c": [0.4, 0.5, 0.6]}
    scores = limr_scores(curves)
    assert scores["a"] == pytest.approx(1 - (0.04 + 0.01 + 0.16) / 1.16)
    assert scores["b"] == pytest.approx(1 - (0.0 + 0.04 + 0.16) / 1.16)
    assert scores["c"] == pytest.approx(1 - (0.04 + 0.01 + 0.0) / 1.16)
    assert all(s <= 1.0 for s in scores.values())


def test_edge_cases():
    assert limr_scores({"a": [1.0, 1.0], "b": [1.0, 1.0]}) == {"a": 1.0, "b": 1.0}  # nothing left to learn
    with pytest.raises(ValueError, match=r"\[0, 1\]"):
        limr_scores({"a": [-1.0, 1.0]})
    with pytest.raises(ValueError, match="same"):
        average_curve({"a": [0.0], "b": [0.0, 1.0]})


def test_rewards_are_scaled_visits_become_epochs_and_group_ids_name_rows():
    assert scale(-1.0, 0.0, 1.0) == 0.0 and scale(1.0, 0.0, 1.0) == 1.0  # ToRL's -1/+1
    assert scale(0.0, -3.0, 3.0) == 0.5  # ToolRL's R_correct range
    curves, epochs = epoch_curves({"a": [0.0, 1.0, 1.0], "b": [0.5, 0.5]}, ["a", "b"])
    assert epochs == 2 and curves == {"a": [0.0, 1.0], "b": [0.5, 0.5]}
    with pytest.raises(ValueError, match="never sampled 1 of 2"):
        epoch_curves({"a": [1.0]}, ["a", "b"])
    assert row_id_of("3.0.1:row7") == "row7" and row_id_of("3.1.0:a:b") == "a:b"
    # each sample scaled, then averaged: ToRL's -1.5 (wrong, failing code) and -1 both count 0
    visits = {"a": [[-1.5, 1], [1, 1]], "b": [[-1, -1], [-1, -1]], "c": [[1, 1], [1, 1]]}
    result = score_visits(visits, ["a", "b", "c"], threshold=0.5)
    assert result.curves == {"a": [0.5, 1.0], "b": [0.0, 0.0], "c": [1.0, 1.0]}
    # avg [0.5, 2/3], room 0.25 + 1/9: a 1 - (1/9) / room ~ 0.69, b ~ -0.92, c 0
    assert result.scores == pytest.approx(
        {"a": 1 - (1 / 9) / (13 / 36), "b": 1 - (25 / 36) / (13 / 36), "c": 0}
    )
    assert result.kept == ["a"]


# --- the probe on the tiny model -------------------------------------------------------------------
@REWARDS.register("test_limr_digit_share")
class DigitShare(RewardComponent):
    """Share of digits in the policy's text: in [0, 1] and different between random samples."""

    name = "test_limr_digit_share"

    def score(self, trajectory, ctx):
        text = assistant_text(trajectory)
        return sum(c.isdigit() for c in text) / max(1, len(text))


@pytest.fixture(scope="module")
def run_config_file(tmp_path_factory):
    root = tmp_path_factory.mktemp("limr")
    model = build_tiny_model(root / "tiny", hidden_size=32, num_layers=1, num_heads=2, num_kv_heads=1)
    train, held_out = make_splits(6, 2, seed=0)
    config = {
        "seed": 1,
        "output_dir": str(root / "run"),
        "model": {"path": str(model)},
        "template": {"name": "qwen_tool"},
        "limits": {"max_turns": 1, "max_new_tokens_per_turn": 8, "max_total_new_tokens": 8},
        "sampling": {"temperature": 1.0},
        "rollout": {"prompts_per_step": 2, "samples_per_prompt": 2},
        "reward": {"components": [{"name": "test_limr_digit_share"}]},
        "optimizer": {"lr": 1e-3},
        "training": {"steps": 50, "minibatch_size": 4},
        "data": {
            "train_path": str(write_rows(train, root / "train.jsonl")),
            "eval_path": str(write_rows(held_out, root / "eval.jsonl")),
        },
    }
    path = root / "run.json"
    path.write_text(json.dumps(config))
    return path


def rows_of(path):
    return [json.loads(line) for line in Path(path).read_text().splitlines() if line.strip()]


def test_the_probe_scores_every_prompt_and_writes_the_rows_above_the_threshold(run_config_file, tmp_path):
    config = validate_config(json.loads(run_config_file.read_text()))
    result = limr_filter(
        config, tmp_path / "kept.jsonl", threshold=0.6, epochs=2, probe_dir=tmp_path / "probe"
    )
    rows = rows_of(config.data.train_path)
    ids = [row["id"] for row in rows]
    assert result.steps == 6 and result.epochs == 2  # 2 passes over 6 rows at 2 prompts a step
    assert sorted(result.scores) == sorted(ids)
    assert all(score <= 1.0 for score in result.scores.values())
    assert all(len(c) == 2 and all(0.0 <= r <= 1.0 for r in c) for c in result.curves.values())
    expected = [i for i in ids if result.scores[i] >= 0.6]
    assert result.kept == expected
    kept = rows_of(tmp_path / "kept.jsonl")
    assert [r["id"] for r in kept] == expected
    assert kept == [rows[ids.index(i)] for i in expected]  # the rows as written
    assert len((tmp_path / "probe" / "metrics.jsonl").read_text().splitlines()) == 6
    assert not (tmp_path / "probe" / "checkpoints").exists()  # the probe's weights are not kept
    saved = json.loads((tmp_path / "probe" / "limr_scores.json").read_text())
    assert saved["prompts"].keys() == result.scores.keys() and saved["kept"] == len(expected)


def test_the_cli_runs_the_probe_for_the_given_steps(run_config_file, tmp_path, capsys):
    out = tmp_path / "filtered.jsonl"
    argv = ["limr", str(run_config_file), "--probe-steps", "3", "--threshold", "-100", "--out", str(out)]
    assert main([*argv, "--probe-dir", str(tmp_path / "probe"), "--threads", "1"]) == 0
    summary = json.loads(capsys.readouterr().out.strip().splitlines()[-1])
    assert summary["prompts"] == 6 and summary["epochs"] == 1 and summary["probe_steps"] == 3
    assert summary["kept"] == 6 and len(rows_of(out)) == 6  # every score is above -100
    with pytest.raises(SystemExit, match="never sampled 4 of 6"):  # one step sees 2 of the 6 rows
        main([*argv[:3], "1", *argv[4:], "--probe-dir", str(tmp_path / "short")])
    with pytest.raises(SystemExit, match="'correctness' is not a reward component"):
        main([*argv, "--component", "correctness"])


def test_the_recorder_keeps_each_visit_by_row_and_can_read_one_component():
    from trainers.data_prep.limr import RewardRecorder
    from trainers.trajectory import Trajectory

    def traj(group, reward, part):
        return Trajectory(uid=group, group_id=group, reward=reward, rewards={"digits": part})

    total, digits = RewardRecorder(), RewardRecorder("digits")
    step_1 = [traj("1.0.0:a", 2.0, 0.1), traj("1.0.0:a", 3.0, 0.2)]  # one group of 2 samples
    step_2 = [traj("2.0.1:a", 4.0, 0.3), traj("2.0.0:b", 5.0, 0.4)]
    for step, batch in enumerate([step_1, step_2], start=1):
        total.log_trajectories(step, batch)
        digits.log_trajectories(step, batch)
    assert total.visits() == {"a": [[2.0, 3.0], [4.0]], "b": [[5.0]]}
    assert digits.visits() == {"a": [[0.1, 0.2], [0.3]], "b": [[0.4]]}


def test_rows_without_ids_get_the_ids_the_trainer_gives_them(tmp_path):
    from trainers.data_prep.limr import read_raw_rows
    from trainers.training.data import read_rows

    path = tmp_path / "rows.jsonl"
    path.write_text('{"question": "a"}\n\n{"question": "b", "id": "x"}\n{"question": "c"}\n')
    assert [row_id for row_id, _ in read_raw_rows(path)] == [r["id"] for r in read_rows(path)]
    assert [row for _, row in read_raw_rows(path)][0] == {"question": "a"}  # as written
