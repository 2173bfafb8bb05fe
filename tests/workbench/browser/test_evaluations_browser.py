"""In chromium against real Celery workers, two processes as two machines would run them: one consumes only
the gpu queue (training), the other only the rollout queue (rollout jobs and evaluations). A tiny run
launched from the run form with rollout.backend: remote trains on the rollout worker's trajectories and
writes two checkpoints, each is evaluated from the run page's Evaluate link, both appear on the dataset's
leaderboard (sortable), and an evaluation's trajectory opens turn by turn in the inspector."""

from __future__ import annotations

import re
import uuid
from pathlib import Path
from typing import NamedTuple

import pytest
from playwright.sync_api import expect

from tests.support.polling import wait_for
from tests.workbench.support.datasets import prompts_version
from tests.workbench.support.worker import WorkerProcess
from workbench.evaluations.models import Evaluation
from workbench.runs.models import MetricPoint, Run
from workbench.runs.services import run_create

pytestmark = [pytest.mark.browser, pytest.mark.services, pytest.mark.slow, pytest.mark.timeout(600)]

# the tiny model at its smallest, 2 steps of 2 prompts x 2 samples, a checkpoint after each step
RUN_CONFIG = {
    "model": {"tiny": {"hidden_size": 32, "num_layers": 1, "num_heads": 2, "num_kv_heads": 1}},
    "tools": [{"name": "calculator"}],
    "rollout": {"prompts_per_step": 2, "samples_per_prompt": 2},
    "limits": {"max_new_tokens_per_turn": 8, "max_turns": 2},
    "training": {"steps": 2},
    "checkpoint": {"every_steps": 1},
}
# the same run as the run form's fields, with its rollouts sent to the rollout workers
FORM_FIELDS = {
    "model.tiny.hidden_size": "32",
    "model.tiny.num_layers": "1",
    "model.tiny.num_heads": "2",
    "model.tiny.num_kv_heads": "1",
    "tools": '[{"name": "calculator"}]',
    "rollout.prompts_per_step": "2",
    "rollout.samples_per_prompt": "2",
    "limits.max_new_tokens_per_turn": "8",
    "limits.max_turns": "2",
    "training.steps": "2",
    "checkpoint.every_steps": "1",
}


class Workers(NamedTuple):
    trainer: WorkerProcess  # the gpu queue only
    rollouts: WorkerProcess  # the rollout queue only

    def log_tails(self) -> str:
        return "\n".join(f"--- {w.hostname}\n{w.log_tail()}" for w in self)


@pytest.fixture(scope="module")
def workers(worker_env, django_db_blocker, tmp_path_factory):
    """A training worker (the gpu queue) and a rollout worker. They share the session's run directory and
    artifact store (WORKBENCH_VAR_DIR, tests/workbench/conftest.py) with every other worker of the session,
    as machines share a volume and an object store: the session's own worker also takes gpu runs, and the
    rollout worker accepts only weights published in that store. The run's rollout jobs go to a queue of
    the module's own (WORKBENCH_ROLLOUT_QUEUE), which a rollout worker of another session never takes."""
    rollout_queue = f"rollout-{uuid.uuid4().hex[:6]}"
    env = {**worker_env, "WORKBENCH_ROLLOUT_QUEUE": rollout_queue}
    logs = tmp_path_factory.mktemp("workers")
    started = Workers(
        trainer=WorkerProcess(env=env, log_dir=logs, queues="gpu"),
        rollouts=WorkerProcess(env=env, log_dir=logs, queues=f"{rollout_queue},rollout"),  # + evaluations
    )
    for worker in started:
        worker.start()
    with django_db_blocker.unblock():
        for worker in started:
            worker.wait_online()
    yield started
    for worker in started:
        worker.stop()


def launch_from_run_form(page, name: str) -> Run:
    """Fill the run form as a person would (config sections start collapsed), rollouts on the rollout
    workers and training on the gpu queue, and launch; the run the dashboard opened for."""
    page.goto("/runs/new/")
    page.locator("[name='name']").fill(name)
    page.locator("[name='queue']").select_option("gpu")
    page.locator("[name='dataset_version']").select_option(label="prompts v1")
    for path, value in {**FORM_FIELDS, "rollout.backend": "remote"}.items():
        section = page.locator(f"details:has([name='{path}'])")
        if section.count() and section.get_attribute("open") is None:
            section.locator(":scope > summary").click()
        field = page.locator(f"[name='{path}']")
        if field.evaluate("e => e.tagName") == "SELECT":
            field.select_option(value)
        else:
            field.fill(value)
    page.get_by_role("button", name="Launch").click()
    page.wait_for_url(re.compile(r"/runs/\d+/$"))
    return Run.objects.get(pk=int(page.url.rstrip("/").rsplit("/", 1)[1]))


def metric(run: Run, key: str) -> list[float]:
    return list(MetricPoint.objects.filter(run=run, key=key).order_by("step").values_list("value", flat=True))


def evaluate_from_run_page(page, run: Run, step: int) -> None:
    page.goto(run.get_absolute_url())
    page.locator("details:has(.evaluate-checkpoint) > summary").click()
    page.locator(f"li:has-text('step {step}:') .evaluate-checkpoint").click()
    page.wait_for_url(re.compile(r"/evaluations/new/\?checkpoint=\d+$"))
    expect(page.locator("[name='checkpoint'] option:checked")).to_have_text(f"{run.name} @ step {step}")
    expect(page.locator("[name='dataset_version'] option:checked")).to_have_text("prompts v1")
    page.locator("[name='split']").select_option("train")
    page.locator("[name='samples']").fill("2")
    page.locator("[name='max_problems']").fill("3")
    page.get_by_role("button", name="Evaluate").click()
    page.wait_for_url(re.compile(r"/evaluations/\d+/$"))
    body = page.locator("#evaluation-body")
    expect(body).to_have_attribute("data-status", re.compile("succeeded|failed"), timeout=240_000)
    assert body.get_attribute("data-status") == "succeeded", body.inner_text()
    expect(page.locator("#evaluation-metrics [data-metric='pass@2']")).not_to_have_text("—")


def test_a_run_on_a_rollout_worker_trains_and_two_checkpoints_reach_leaderboard_and_inspector(
    page, login, member, team, workers, settings, tmp_path
):
    settings.MEDIA_ROOT = tmp_path / "media"
    prompts_version(team, member, n=4)
    login(member)
    run = launch_from_run_form(page, "tiny-evals")
    assert run.queue == "gpu" and run.config["rollout"]["backend"] == "remote"
    finished = re.compile("succeeded|failed|cancelled")
    expect(page.locator("#run-status")).to_have_attribute("data-status", finished, timeout=300_000)
    run.refresh_from_db()
    assert run.status == "succeeded", f"{run.log_tail}\n{workers.log_tails()}"
    assert list(run.checkpoints.values_list("step", flat=True)) == [1, 2]
    # every step's rollout went out as jobs to the one live rollout worker, on the weights of its step
    assert metric(run, "rollout/workers") == [1.0, 1.0]
    chunks = metric(run, "rollout/chunks")
    assert len(chunks) == 2 and min(chunks) >= 1
    assert metric(run, "rollout/weight_version") == [1.0, 2.0]
    chunk_received = r"workbench\.runs\.tasks\.rollout_chunk\[[^\]]+\] received"
    assert len(re.findall(chunk_received, workers.rollouts.log_tail(1_000_000))) >= 2
    assert not re.search(chunk_received, workers.trainer.log_tail(1_000_000))  # the trainer sampled nothing

    evaluate_from_run_page(page, run, 1)
    evaluate_from_run_page(page, run, 2)
    assert set(Evaluation.objects.values_list("status", "queue")) == {("succeeded", "rollout")}

    page.locator("nav.mainnav").get_by_role("link", name="Evaluations").click()
    page.locator("#leaderboards a", has_text="prompts v1").click()
    rows = page.locator("#leaderboard tbody tr")
    expect(rows).to_have_count(2)
    expect(page.locator("#leaderboard")).to_contain_text("tiny-evals @ step 1")
    expect(page.locator("#leaderboard")).to_contain_text("tiny-evals @ step 2")
    page.locator("#leaderboard th[data-column='model'] a").click()  # sort by model, descending
    expect(page.locator("#leaderboard th[data-column='model']")).to_have_attribute("aria-sort", "descending")
    expect(rows.first).to_contain_text("@ step 2")
    page.locator("#leaderboard th[data-column='model'] a").click()
    expect(rows.first).to_contain_text("@ step 1")
    with page.expect_download() as download:
        page.locator("#leaderboard-csv").click()
    lines = Path(download.value.path()).read_text(encoding="utf-8").splitlines()
    assert len(lines) == 3 and lines[0].startswith("evaluation_id,model,")

    rows.first.locator("td:nth-child(2) a").click()
    page.wait_for_url(re.compile(r"/evaluations/\d+/$"))
    trajectories = page.locator("#trajectory-rows tbody tr")
    expect(trajectories).to_have_count(6)  # 3 problems x k = 2
    trajectories.first.locator("a").first.click()
    page.wait_for_url(re.compile(r"/evaluations/\d+/trajectories/\d+/$"))
    expect(page.locator(".turns .role-prompt")).to_contain_text(re.compile(r"What is \d \+ 2\?"))
    expect(page.locator(".turns .role-assistant").first).to_be_visible()


def test_a_run_evaluating_through_jobs_draws_its_evaluation_panel(
    page, login, member, team, workers, settings, tmp_path
):
    """evaluation.runner: jobs on a real worker: the run's checkpoints at steps 1 and 2 are evaluated as jobs
    (greedy and k = 2) while it trains, and the dashboard's Evaluation chart draws their series by step."""
    from django.core.files.base import ContentFile

    from workbench.datasets.services import dataset_upload_create

    settings.MEDIA_ROOT = tmp_path / "media"
    rows = "".join(f'{{"question": "What is {i} + 2?", "answer": "{i + 2}"}}\n' for i in range(8)).encode()
    upload = dataset_upload_create(
        team=team, user=member, name="with-eval", kind="prompts", file=ContentFile(rows, name="p.jsonl"),
        eval_ratio=0.25, process_now=True,
    )  # fmt: skip
    evaluation = {"every_steps": 1, "pass_k": 2, "max_problems": 2, "runner": "jobs"}
    config = {**RUN_CONFIG, "evaluation": evaluation}
    run = run_create(
        team=team, user=member, name="by-jobs", config=config, queue="gpu", dataset_version=upload.version
    )

    def done() -> bool:
        finished = Evaluation.objects.filter(run=run, automatic=True, status__in=["succeeded", "failed"])
        return Run.objects.get(pk=run.pk).is_finished and finished.count() == 4

    wait_for(done, 300, "the run and its four evaluations", *workers)
    evaluations = Evaluation.objects.filter(run=run).order_by("checkpoint__step", "mode")
    assert [(e.checkpoint.step, e.mode, e.status) for e in evaluations] == [
        (1, "greedy", "succeeded"), (1, "sampled", "succeeded"),
        (2, "greedy", "succeeded"), (2, "sampled", "succeeded"),
    ], [e.error for e in evaluations]  # fmt: skip

    login(member)
    page.goto(run.get_absolute_url())
    chart = page.locator("#chart-eval")
    expect(chart.locator(".main-svg").first).to_be_visible(timeout=60_000)
    names = page.evaluate("document.getElementById('chart-eval').data.map((t) => t.name)")
    assert {"eval/greedy/accuracy", "eval/sampled/pass@2"} <= set(names)
    steps = page.evaluate(
        "document.getElementById('chart-eval').data.find((t) => t.name === 'eval/sampled/pass@2').x"
    )
    assert list(steps) == [1, 2]
