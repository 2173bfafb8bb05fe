"""An agent run launched from the workbench trains on a real Celery worker: the calculator agent program
plays its episodes in the sandbox, and the inspector shows their logs (about 30 s, worker start included)."""

from __future__ import annotations

import pytest
from django.urls import reverse

from tests.support.polling import wait_for
from trainers.workbench_api import demo_agent_program
from workbench.agents.services import agent_program_create
from workbench.runs.models import MetricPoint, Run, RunStatus
from workbench.runs.services import run_create

pytestmark = [pytest.mark.services, pytest.mark.slow, pytest.mark.timeout(300)]

CONFIG = {
    "rollout": {"backend": "agent", "prompts_per_step": 2, "samples_per_prompt": 2, "agent": {"wall_s": 60}},
    "limits": {"max_new_tokens_per_turn": 12, "max_turns": 2},
    "reward": {"components": [{"name": "correctness", "params": {"mode": "numeric"}}]},
    "training": {"steps": 1},
}


def test_an_agent_run_trains_on_the_worker(
    transactional_db, celery_worker, client_for, team, member, prompts
):
    program = agent_program_create(team=team, user=member, name="calc", source=demo_agent_program())
    run = run_create(
        team=team, user=member, name="agent", config=CONFIG, queue="cpu", dataset_version=prompts,
        agent_version=program,
    )  # fmt: skip
    done = wait_for(lambda: Run.objects.get(pk=run.pk).is_finished, 240, "the run to finish", celery_worker)
    run = Run.objects.get(pk=run.pk)
    assert done and run.status == RunStatus.SUCCEEDED, run.log_tail
    metrics = dict(MetricPoint.objects.filter(run=run, step=1).values_list("key", "value"))
    assert (metrics["agent/episodes"], metrics["agent/failed"], run.trajectories.count()) == (4.0, 0.0, 4)
    record = run.trajectories.first()
    assert record.data["metadata"]["agent"]["log"]["status"] == "ok"
    body = client_for(member).get(reverse("runs:trajectory", args=[run.pk, record.pk])).content.decode()
    assert 'id="agent-episode"' in body and 'id="agent-stdout"' in body
