"""Ingest services: batched upserts keyed by (run, step, key) never duplicate."""

from __future__ import annotations

import json
import math

from trainers.trajectory import ToolCall
from workbench.runs.models import Alert, MetricPoint, TrajectoryRecord
from workbench.runs.telemetry.ingest import (
    alerts_record,
    checkpoint_record,
    metrics_ingest,
    trajectories_ingest,
)


def test_retried_metric_batch_does_not_duplicate(run):
    batch = [(0, "reward/mean", 0.1), (1, "reward/mean", 0.2), (1, "entropy", 1.5)]
    metrics_ingest(run_id=run.id, points=batch)
    metrics_ingest(run_id=run.id, points=batch)
    assert MetricPoint.objects.filter(run=run).count() == 3


def test_replayed_step_overwrites_value(run):
    metrics_ingest(run_id=run.id, points=[(5, "loss", 1.0)])
    metrics_ingest(run_id=run.id, points=[(5, "loss", 0.5)])
    assert list(MetricPoint.objects.filter(run=run).values_list("value", flat=True)) == [0.5]


def test_non_finite_values_are_dropped(run):
    written = metrics_ingest(run_id=run.id, points=[(0, "a", math.nan), (0, "b", math.inf), (0, "c", 2.0)])
    assert written == 1
    assert list(MetricPoint.objects.filter(run=run).values_list("key", flat=True)) == ["c"]


def test_last_step_never_moves_backwards(run):
    metrics_ingest(run_id=run.id, points=[(10, "a", 1.0)])
    metrics_ingest(run_id=run.id, points=[(3, "a", 1.0)])
    run.refresh_from_db()
    assert run.last_step == 10


def test_retried_trajectory_batch_does_not_duplicate(run, make_trajectory):
    batch = {2: [make_trajectory("g0", 0), make_trajectory("g0", 1), make_trajectory("g1", 0)]}
    trajectories_ingest(run_id=run.id, batches=batch)
    trajectories_ingest(run_id=run.id, batches=batch)
    assert TrajectoryRecord.objects.filter(run=run).count() == 3


def test_trajectory_summary_columns(run, make_trajectory):
    traj = make_trajectory("g7", 3, reward=-0.5, tools=("calculator", "python"), failed=1, correct=False)
    trajectories_ingest(run_id=run.id, batches={4: [traj]})
    rec = TrajectoryRecord.objects.get(run=run)
    assert (rec.key, rec.group_id, rec.sample_index, rec.step) == ("g7/3", "g7", 3, 4)
    assert (rec.reward, rec.correct, rec.num_turns, rec.length) == (-0.5, False, 2, 6)
    assert (rec.num_tool_calls, rec.num_failed_calls) == (2, 1)
    assert rec.tool_counts == {"calculator": 1, "python": 1}
    assert rec.data["turns"][3]["text"] == "The answer is 4."


def test_correct_column_reads_an_answer_sub_score_without_a_correctness_reward(run, make_trajectory):
    """ARTIST's reward has no `correctness` component: its answer part says whether the answer was right."""
    right, wrong, unjudged = (make_trajectory("g0", i, correct=None) for i in range(3))
    right.rewards = {"artist": 2.0, "artist/answer": 1.0, "artist/tool": 1.0}
    wrong.rewards = {"artist": 1.0, "artist/answer": 0.0, "artist/tool": 1.0}
    unjudged.rewards = {"format": 1.0}
    trajectories_ingest(run_id=run.id, batches={1: [right, wrong, unjudged]})
    verdicts = dict(TrajectoryRecord.objects.filter(run=run).values_list("sample_index", "correct"))
    assert verdicts == {0: True, 1: False, 2: None}


def test_checkpoint_moves_resume_point(run):
    checkpoint_record(run_id=run.id, step=20, path="/tmp/ckpt-20")
    checkpoint_record(run_id=run.id, step=20, path="/tmp/ckpt-20")
    run.refresh_from_db()
    assert run.last_checkpoint_step == 20
    assert run.checkpoints.count() == 1


SERVED: list[tuple[str, int]] = []


def failing_service(*, checkpoint) -> None:
    SERVED.append(("failing", checkpoint.step))
    raise RuntimeError("the service is down")


def recording_service(*, checkpoint) -> None:
    SERVED.append(("recording", checkpoint.step))


def test_a_new_checkpoint_goes_to_each_service_once_committed_and_a_failing_one_is_only_logged(
    run, settings, django_capture_on_commit_callbacks, caplog
):
    settings.RUNS_CHECKPOINT_SERVICES = [f"{__name__}.failing_service", f"{__name__}.recording_service"]
    SERVED.clear()
    with django_capture_on_commit_callbacks(execute=True):
        checkpoint_record(run_id=run.id, step=4, path="/tmp/ckpt-4")
        assert SERVED == []  # not before the checkpoint's row is committed
    with django_capture_on_commit_callbacks(execute=True):
        checkpoint_record(run_id=run.id, step=4, path="/tmp/ckpt-4")  # a replayed step: not new
    assert SERVED == [("failing", 4), ("recording", 4)]
    assert "failing_service failed" in caplog.text


def test_alerts_are_idempotent_by_step_and_rule(run):
    alert = {"step": 30, "rule": "reward_std_collapse", "evidence": {"ratio": 0.12}, "severity": "critical"}
    alerts_record(run_id=run.id, alerts=[alert])
    alerts_record(run_id=run.id, alerts=[alert])
    stored = Alert.objects.get(run=run)
    assert (stored.step, stored.rule, stored.evidence, stored.severity) == (
        30, "reward_std_collapse", {"ratio": 0.12}, "critical"
    )  # fmt: skip


def test_nul_characters_in_model_text_are_stored_as_replacement(run, make_trajectory):
    trajectories_ingest(run_id=run.id, batches={1: [make_trajectory("g0", 0, text="a\x00b")]})
    rec = TrajectoryRecord.objects.get(run=run)
    assert (rec.final_answer, rec.data["turns"][3]["text"]) == ("a\ufffdb", "a\ufffdb")


def test_non_finite_floats_in_trajectories_and_alerts_are_stored_as_null(run, make_trajectory):
    traj = make_trajectory("g0", 0)
    traj.turns[1].logprobs = [float("-inf"), -0.5]
    trajectories_ingest(run_id=run.id, batches={1: [traj]})
    alerts_record(run_id=run.id, alerts=[{"step": 1, "rule": "r", "evidence": {"reward_mean": math.nan}}])
    assert TrajectoryRecord.objects.get(run=run).data["turns"][1]["logprobs"] == [None, -0.5]
    assert Alert.objects.get(run=run).evidence == {"reward_mean": None}


def test_hostile_model_output_is_stored_not_rejected(run, make_trajectory):
    """One lone surrogate, NUL, NaN or deeply nested argument made PostgreSQL reject the whole step's
    batch (DataError) and failed the run: each is replaced and the rest of the batch is kept."""
    hostile = make_trajectory("g\ud800", 0, text="bad \ud800 text \x00 end \udfff")
    deep: object = "leaf"
    for _ in range(500):
        deep = [deep]
    hostile.turns[1].tool_calls.append(
        ToolCall(name="calc\ud83d", arguments={"x\x00": math.nan, "y": -math.inf, "deep": deep}, raw="\ud800")
    )
    hostile.metadata["score"] = math.inf
    hostile.advantage = math.nan
    written = trajectories_ingest(run_id=run.id, batches={3: [hostile, make_trajectory("g1", 0)]})
    assert written == 2
    rec = TrajectoryRecord.objects.get(run=run, group_id="g\ufffd")
    assert rec.key == "g\ufffd/0" and rec.advantage is None
    assert rec.data["turns"][3]["text"] == "bad \ufffd text \ufffd end \ufffd"
    call = rec.data["turns"][1]["tool_calls"][-1]
    assert (call["name"], call["raw"]) == ("calc\ufffd", "\ufffd")
    assert (call["arguments"]["x\ufffd"], call["arguments"]["y"]) == (None, None)
    assert "deeper than" in json.dumps(call["arguments"]["deep"])
    assert rec.data["metadata"]["score"] is None
    assert TrajectoryRecord.objects.filter(run=run, group_id="g1").exists()


def test_hostile_alert_text_and_metric_keys_are_stored(run):
    alert = {"step": 1, "rule": "r\ud800", "message": "m\x00", "evidence": {"v\udc00": math.nan}}
    alerts_record(run_id=run.id, alerts=[alert])
    stored = Alert.objects.get(run=run)
    assert (stored.rule, stored.message, stored.evidence) == ("r\ufffd", "m\ufffd", {"v\ufffd": None})
    assert metrics_ingest(run_id=run.id, points=[(1, "loss/\ud800", 1.0), (1, "nul\x00", 2.0)]) == 2
    assert set(MetricPoint.objects.filter(run=run).values_list("key", flat=True)) == {
        "loss/\ufffd",
        "nul\ufffd",
    }
