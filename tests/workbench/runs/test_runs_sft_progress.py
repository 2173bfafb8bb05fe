"""The SFT warm start on the dashboard: its steps stored as sft/* series (leaving the run's RL step alone),
charted while the run is still in SFT, and its progress on the status strip."""

from __future__ import annotations

import json

import pytest
from django.urls import reverse

from workbench.runs.execution.sink import DatabaseSink
from workbench.runs.models import MetricPoint


def sft_step(step: int, total: int = 50) -> dict[str, float]:
    return {"sft/loss": 5.0 / step, "sft/grad_norm": 1.0, "sft/lr": 1e-3, "sft/progress": step / total}


@pytest.mark.slow
def test_sft_steps_are_stored_without_moving_the_rl_step(run):
    sink = DatabaseSink(run.id, flush_points=1000, flush_seconds=0.0)
    for step in range(1, 41):
        sink.log_sft(step, sft_step(step))
    run.refresh_from_db()
    assert run.last_step is None  # the strip's "step" is the RL step; SFT has its own progress
    losses = MetricPoint.objects.filter(run=run, key="sft/loss").order_by("step")
    assert list(losses.values_list("step", flat=True)) == list(range(1, 41))
    sink.log_metrics(1, {"reward/mean": 0.5})
    sink.close()
    run.refresh_from_db()
    assert run.last_step == 1


def test_the_dashboard_charts_sft_while_no_rl_step_exists(client_for, member, run):
    sink = DatabaseSink(run.id, flush_points=1000, flush_seconds=0.0)
    for step in range(1, 31):
        sink.log_sft(step, sft_step(step))
    client = client_for(member)
    url = reverse("runs:series", args=[run.pk]) + "?keys=sft/loss,sft/progress&available=1"
    payload = client.get(url).json()
    assert payload["last_step"] is None
    assert payload["series"]["sft/loss"]["x"] == list(range(1, 31))
    assert payload["series"]["sft/progress"]["y"][-1] == 30 / 50
    assert {"sft/loss", "sft/progress"} <= set(payload["available"])
    body = client.get(reverse("runs:status", args=[run.pk])).content.decode()
    assert "SFT 60%" in body and 'data-sft-step="30"' in body


def test_sft_and_rl_series_each_get_their_own_step_window(client_for, member, run):
    """A long SFT stage must not widen the buckets of a short RL run's charts (and the reverse)."""
    sink = DatabaseSink(run.id, flush_points=10_000, flush_seconds=60.0)
    for step in range(1, 2001):
        sink.log_sft(step, sft_step(step, total=2000))
    for step in range(1, 11):
        sink.log_metrics(step, {"reward/mean": step / 10})
    sink.close()
    client = client_for(member)
    series = reverse("runs:series", args=[run.pk])
    rl = client.get(series + "?keys=reward/mean&buckets=50").json()["series"]["reward/mean"]
    sft = client.get(series + "?keys=sft/loss&buckets=50").json()["series"]["sft/loss"]
    assert rl["x"] == list(range(1, 11))  # every RL step, not buckets 40 steps wide
    assert sft["x"][-1] == 2000 and len(sft["x"]) <= 3 * 50


def test_dashboard_page_lists_the_sft_series(client_for, member, run):
    DatabaseSink(run.id, flush_seconds=0.0).log_sft(1, sft_step(1))
    response = client_for(member).get(run.get_absolute_url())
    assert "sft/loss" in response.context["keys"]


@pytest.mark.slow
def test_sft_reaches_the_database_while_it_runs(run, tmp_path):
    """The real SFT stage through the database sink: each SFT step is stored within a flush interval of
    being trained, long before RL begins (the sink flushes every 2 s; this clock ticks 1 s a reading)."""
    import itertools

    from trainers.config.loader import validate_config
    from trainers.demo.arithmetic import make_splits, write_rows
    from trainers.demo.catalog import expert_conversations
    from trainers.training.run import run_config
    from trainers.training.sinks import MultiSink, Sink

    experts = tmp_path / "experts.jsonl"
    experts.write_text("".join(json.dumps(r) + "\n" for r in expert_conversations(24)), encoding="utf-8")
    tiny = {
        "hidden_size": 32,
        "num_layers": 1,
        "num_heads": 2,
        "num_kv_heads": 1,
        "tokenizer_corpus": "sft_data",
    }
    config = validate_config({
        "output_dir": str(tmp_path / "run"), "model": {"path": "tiny", "tiny": tiny},
        "tools": [{"name": "calculator"}], "rollout": {"prompts_per_step": 2, "samples_per_prompt": 2},
        "limits": {"max_new_tokens_per_turn": 8, "max_turns": 2}, "training": {"steps": 1},
        "sft": {"data_path": str(experts), "batch_size": 4, "epochs": 2},
        "data": {"train_path": str(write_rows(make_splits(8, 0, seed=1)[0], tmp_path / "train.jsonl"))},
    })  # fmt: skip
    stored: list[int] = []  # sft/loss points in the database as each SFT step is logged

    class Probe(Sink):
        def log_sft(self, step, metrics):
            stored.append(MetricPoint.objects.filter(run=run, key="sft/loss").count())

        def log_metrics(self, step, metrics): ...

        def log_trajectories(self, step, trajectories): ...

        def log_eval(self, step, results): ...

        def log_checkpoint(self, step, path): ...

        def log_alerts(self, alerts): ...

        def close(self): ...

    ticks = itertools.count()
    database = DatabaseSink(run.pk, flush_points=10_000, clock=lambda: float(next(ticks)))
    run_config(config, sink=MultiSink([database, Probe()]))
    assert len(stored) == 12  # 2 epochs of 24 conversations, 4 a step
    assert all(step - count <= 2 for step, count in enumerate(stored, start=1)), stored
    run.refresh_from_db()
    assert run.last_step == 1  # the RL step; SFT's 12 steps are their own series


def test_the_strip_says_what_runs_between_the_last_sft_step_and_the_first_rl_step(client_for, member, run):
    """SFT at 100% and no RL step yet: the strip names the phase the trainer reported (what it logged
    before that is stored first), and says nothing more once RL steps arrive."""
    from trainers.workbench_api import Phase
    from workbench.runs.models import RunStatus

    run.status = RunStatus.RUNNING
    run.save()
    sink = DatabaseSink(run.id, flush_points=10_000, flush_seconds=60.0)
    for step in range(1, 51):
        sink.log_sft(step, sft_step(step))
    sink.log_phase(Phase.STARTING_RL)
    client, url = client_for(member), reverse("runs:status", args=[run.pk])
    body = client.get(url).content.decode()
    assert "SFT 100%" in body and "starting RL: building the trainer…" in body
    said = {}
    for phase in (Phase.EVALUATING, Phase.TRAINING, Phase.SAVING):
        sink.log_phase(phase)
        said[phase] = client.get(url).content.decode().split('id="run-phase"')[1].split("</span>")[0]
    assert "evaluating the policy" in said[Phase.EVALUATING]
    assert "running RL step 1" in said[Phase.TRAINING] and "saving a checkpoint" in said[Phase.SAVING]
    sink.log_phase(Phase.TRAINING)
    sink.log_metrics(1, {"reward/mean": 0.5})
    sink.flush()
    body = client.get(url).content.decode()
    assert "step 1" in body and 'id="run-phase"' not in body  # the step counter says it trains
    run.refresh_from_db()
    run.status = RunStatus.SUCCEEDED
    run.save()
    sink.log_phase(Phase.EVALUATING)  # a finished run's strip names no phase
    assert 'id="run-phase"' not in client.get(url).content.decode()


def test_a_new_attempt_forgets_the_phase_of_the_one_before(run):
    from trainers.workbench_api import Phase
    from workbench.runs.execution.worker import run_claim

    DatabaseSink(run.id).log_phase(Phase.SAVING)
    run.refresh_from_db()
    assert run.phase == "saving"
    claimed = run_claim(run_id=run.pk, worker="w1")
    run.refresh_from_db()
    assert claimed is not None and run.phase == ""
