"""JobProgress: services clamp and record; the htmx partial polls until the job finishes; team scoped."""

import pytest

from workbench.jobs import services
from workbench.jobs.models import JobProgress
from workbench.jobs.tasks import queue_check


@pytest.fixture
def job(team):
    return services.job_create(team=team, kind="demo")


def test_job_update_marks_running_and_clamps_progress_to_the_unit_range(job):
    services.job_update(job_id=job.id, progress=1.7, message="almost")
    job.refresh_from_db()
    assert (job.status, job.progress, job.message) == ("running", 1.0, "almost")


def test_failure_recorded_marks_the_job_failed_with_the_traceback_and_reraises(job):
    with pytest.raises(ValueError), services.job_failure_recorded(job_id=job.id):
        raise ValueError("row 3: bad")
    job.refresh_from_db()
    assert job.status == "failed"
    assert job.message == "ValueError: row 3: bad"
    assert "Traceback" in job.error


def test_job_enqueue_waits_for_the_commit(job, django_capture_on_commit_callbacks):
    with django_capture_on_commit_callbacks() as callbacks:
        services.job_enqueue(job=job, task=queue_check, queue="cpu")
    assert len(callbacks) == 1  # nothing was sent inside the transaction


def test_progress_partial_keeps_polling_while_the_job_runs(client_for, member, job):
    services.job_update(job_id=job.id, progress=0.25, message="row 250 of 1000")
    response = client_for(member).get(f"/jobs/{job.id}/progress/")
    body = response.content.decode()
    assert 'hx-trigger="every 1s"' in body
    assert 'value="25"' in body
    assert "row 250 of 1000" in body
    assert "HX-Trigger" not in response


def test_progress_partial_stops_polling_and_signals_when_finished(client_for, member, job):
    services.job_succeed(job_id=job.id, message="1000 rows")
    response = client_for(member).get(f"/jobs/{job.id}/progress/")
    assert "hx-trigger" not in response.content.decode()
    assert response["HX-Trigger"] == "job-finished"


def test_progress_of_another_teams_job_is_404(client_for, outsider, job):
    assert client_for(outsider).get(f"/jobs/{job.id}/progress/").status_code == 404


def test_job_error_text_is_escaped(client_for, member, job):
    services.job_fail(job_id=job.id, error="<script>alert(1)</script>")
    body = client_for(member).get(f"/jobs/{job.id}/progress/").content.decode()
    assert "<script>alert(1)</script>" not in body
    assert "&lt;script&gt;" in body


def test_queue_check_view_creates_a_job_for_the_current_team(client_for, member, team):
    client_for(member).post("/status/check/rollout/")
    assert JobProgress.objects.get().team == team


def test_queue_check_of_an_unknown_queue_is_404(client_for, member):
    assert client_for(member).post("/status/check/nope/").status_code == 404
