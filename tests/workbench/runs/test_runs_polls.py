"""What the live run pages poll, through the Django test client on PostgreSQL: an unchanged status strip or
chart data answers 304 Not Modified, anything stored since answers fresh data, a step's chart data and
the trajectory list's rows are built once for every viewer, and each page reads a bounded number of rows.
"""

from __future__ import annotations

from datetime import timedelta

import pytest
from django.core.cache import cache
from django.urls import reverse
from django.utils import timezone

from workbench.accounts.access import get_scoped_or_404
from workbench.runs.models import Run, RunStatus
from workbench.runs.telemetry.ingest import (
    alerts_record,
    checkpoint_record,
    metrics_ingest,
    trajectories_ingest,
)

# Every request reads the session, its user and the user's current team before the view runs.
REQUEST_FLOOR = 3


def series_url(run: Run, keys: str = "reward/mean") -> str:
    return reverse("runs:series", args=[run.pk]) + f"?keys={keys}&buckets=100"


def revalidate(client, url: str, etag: str):
    return client.get(url, HTTP_IF_NONE_MATCH=etag)


@pytest.fixture
def running(run):
    """The `run` fixture training: one RL step stored."""
    Run.objects.filter(pk=run.pk).update(status=RunStatus.RUNNING, started_at=timezone.now(), attempts=1)
    metrics_ingest(run_id=run.pk, points=[(1, "reward/mean", 0.25)])
    return Run.objects.get(pk=run.pk)


def test_status_strip_answers_304_until_a_step_is_stored(client_for, member, running):
    client, url = client_for(member), reverse("runs:status", args=[running.pk])
    first = client.get(url)
    assert first.status_code == 200 and 'data-last-step="1"' in first.content.decode()
    assert "no-cache" in first["Cache-Control"] and "private" in first["Cache-Control"]
    unchanged = revalidate(client, url, first["ETag"])
    assert (unchanged.status_code, unchanged.content, unchanged["ETag"]) == (304, b"", first["ETag"])
    metrics_ingest(run_id=running.pk, points=[(2, "reward/mean", 0.5)])
    fresh = revalidate(client, url, first["ETag"])
    assert fresh.status_code == 200 and 'data-last-step="2"' in fresh.content.decode()
    assert fresh["ETag"] != first["ETag"]


def sft_step_stored(run: Run) -> None:
    metrics_ingest(run_id=run.pk, points=[(4, "sft/progress", 0.5)], advance_step=False)


def cancel_requested(run: Run) -> None:
    Run.objects.filter(pk=run.pk).update(cancel_requested=True)


def checkpoint_saved(run: Run) -> None:
    checkpoint_record(run_id=run.pk, step=1, path="/ckpt/1")


def alert_stored(run: Run) -> None:
    alerts_record(run_id=run.pk, alerts=[{"step": 2, "rule": "echo_trap", "message": "reward fell"}])


def lease_renewed(run: Run) -> None:
    Run.objects.filter(pk=run.pk).update(heartbeat_at=run.started_at + timedelta(seconds=42))


def failed(run: Run) -> None:
    Run.objects.filter(pk=run.pk).update(status=RunStatus.FAILED, error="boom")


@pytest.mark.parametrize(
    ("change", "shown"),
    [
        (sft_step_stored, 'data-sft-step="4"'),
        (cancel_requested, "cancelling"),
        (checkpoint_saved, "checkpoint at 1"),
        (checkpoint_saved, '<div hx-swap-oob="innerHTML:#checkpoints-count">1</div>'),
        (alert_stored, "step 2 · echo_trap"),
        (lease_renewed, "42 s"),
        (failed, "Error: boom"),
    ],
)
def test_status_strip_is_fresh_after_whatever_it_shows_changed(client_for, member, running, change, shown):
    client, url = client_for(member), reverse("runs:status", args=[running.pk])
    etag = client.get(url)["ETag"]
    change(running)
    fresh = revalidate(client, url, etag)
    assert fresh.status_code == 200 and shown in fresh.content.decode()


def test_series_answers_304_until_a_step_is_stored(client_for, member, running):
    client, url = client_for(member), series_url(running)
    first = client.get(url)
    assert first.status_code == 200 and first.json()["series"]["reward/mean"] == {"x": [1], "y": [0.25]}
    assert revalidate(client, url, first["ETag"]).status_code == 304
    metrics_ingest(run_id=running.pk, points=[(2, "reward/mean", 0.5)])
    fresh = revalidate(client, url, first["ETag"])
    assert fresh.status_code == 200 and fresh.json()["series"]["reward/mean"] == {
        "x": [1, 2],
        "y": [0.25, 0.5],
    }
    assert fresh.json()["last_step"] == 2


def test_series_shows_an_alert_stored_after_the_last_step(client_for, member, running):
    client, url = client_for(member), series_url(running)
    etag = client.get(url)["ETag"]
    alerts_record(run_id=running.pk, alerts=[{"step": 1, "rule": "echo_trap", "severity": "critical"}])
    fresh = revalidate(client, url, etag)
    assert fresh.status_code == 200 and [a["rule"] for a in fresh.json()["alerts"]] == ["echo_trap"]


def test_series_shows_the_status_once_the_run_finished(client_for, member, running):
    client, url = client_for(member), series_url(running)
    etag = client.get(url)["ETag"]
    Run.objects.filter(pk=running.pk).update(status=RunStatus.SUCCEEDED)
    fresh = revalidate(client, url, etag)
    assert fresh.status_code == 200 and fresh.json()["status"] == "succeeded"


def test_series_version_differs_per_query(client_for, member, running):
    client = client_for(member)
    etags = {client.get(series_url(running, keys))["ETag"] for keys in ("reward/mean", "loss/kl", "")}
    assert len(etags) == 3


def test_series_is_built_once_for_every_viewer(
    client_for, member, viewer, running, django_assert_num_queries
):
    url, other_viewer = series_url(running), client_for(viewer)
    assert client_for(member).get(url).status_code == 200
    with django_assert_num_queries(REQUEST_FLOOR + 1):  # the run's row, for the access check and version
        cached = other_viewer.get(url)
    assert cached.json()["series"]["reward/mean"] == {"x": [1], "y": [0.25]}


def test_status_strip_is_rendered_once_for_every_viewer_of_a_role(
    client_for, member, viewer, make_user, team, running, django_assert_num_queries
):
    checkpoint_record(run_id=running.pk, step=1, path="/ckpt/1")
    url, other_viewer = reverse("runs:status", args=[running.pk]), client_for(make_user("v2", team, "viewer"))
    first = client_for(viewer).get(url).content
    with django_assert_num_queries(REQUEST_FLOOR + 1):  # no SFT progress, alerts or checkpoints read
        assert other_viewer.get(url).content == first
    assert b"evaluate-checkpoint" not in first  # a member's poll offers Evaluate; a viewer's does not
    assert b"evaluate-checkpoint" in client_for(member).get(url).content


def test_series_and_status_of_another_teams_run_answer_404_even_with_its_etag(
    client_for, member, outsider, running
):
    for url in (series_url(running), reverse("runs:status", args=[running.pk])):
        etag = client_for(member).get(url)["ETag"]
        assert revalidate(client_for(outsider), url, etag).status_code == 404


def test_trajectory_list_shows_trajectories_stored_after_it_was_rendered(
    client_for, member, viewer, running, make_trajectory
):
    url = reverse("runs:trajectories", args=[running.pk])
    trajectories_ingest(run_id=running.pk, batches={1: [make_trajectory("first-group", 0)]})
    assert "first-group/0" in client_for(member).get(url).content.decode()
    trajectories_ingest(run_id=running.pk, batches={2: [make_trajectory("second-group", 0)]})
    body = client_for(viewer).get(url).content.decode()
    assert "first-group/0" in body and "second-group/0" in body
    record = running.trajectories.get(group_id="second-group")
    assert f'href="{reverse("runs:trajectory", args=[running.pk, record.pk])}"' in body  # rows, not escaped


def test_trajectory_list_rows_differ_per_filter_and_serve_htmx(client_for, member, running, make_trajectory):
    trajectories_ingest(
        run_id=running.pk, batches={1: [make_trajectory("a", 0)], 2: [make_trajectory("b", 0)]}
    )
    client, url = client_for(member), reverse("runs:trajectories", args=[running.pk])
    for step, shown in ((1, "a/0"), (2, "b/0")):
        page = client.get(url + f"?step={step}").content.decode()
        assert shown in page and f'name="step" value="{step}"' in page  # its rows and its filter fields
    step_two = client.get(url + "?step=2", HTTP_HX_REQUEST="true").content.decode()
    assert step_two.startswith('<div id="trajectory-rows">') and "b/0" in step_two and "a/0" not in step_two


def test_every_write_of_streamed_data_bumps_the_runs_data_version(running, make_trajectory):
    writes = [
        lambda: metrics_ingest(run_id=running.pk, points=[(3, "reward/mean", 1.0)]),
        lambda: metrics_ingest(run_id=running.pk, points=[(3, "sft/loss", 1.0)], advance_step=False),
        lambda: trajectories_ingest(run_id=running.pk, batches={3: [make_trajectory()]}),
        lambda: alerts_record(run_id=running.pk, alerts=[{"step": 3, "rule": "reward_fall"}]),
        lambda: checkpoint_record(run_id=running.pk, step=3, path="/ckpt/3"),
    ]
    versions = [running.data_version]
    for write in writes:
        write()
        versions.append(Run.objects.values_list("data_version", flat=True).get(pk=running.pk))
    assert versions == sorted(set(versions)) and len(versions) == len(writes) + 1


def test_a_viewers_read_of_a_run_is_one_query(viewer, running, django_assert_num_queries):
    with django_assert_num_queries(1):
        assert get_scoped_or_404(Run, viewer, running.pk) == running


@pytest.mark.parametrize(
    ("name", "revalidated", "most"),
    [
        ("runs:status", False, REQUEST_FLOOR + 4),  # the run, its SFT progress, alerts, checkpoints
        ("runs:status", True, REQUEST_FLOOR + 1),  # the run: 304
        ("runs:series", False, REQUEST_FLOOR + 4),  # the run, its last step, the points, its alerts
        ("runs:series", True, REQUEST_FLOOR + 1),
        # the run, its tags, series, role, alerts, checkpoints, creator, SFT progress; the navigation's
        # teams and invitations
        ("runs:detail", False, REQUEST_FLOOR + 10),
        ("runs:trajectories", False, REQUEST_FLOOR + 4),  # the run, the rows; the navigation
    ],
)
def test_polled_pages_read_a_bounded_number_of_rows(
    client_for, member, running, make_trajectory, django_assert_max_num_queries, name, revalidated, most
):
    trajectories_ingest(run_id=running.pk, batches={1: [make_trajectory("g", i) for i in range(60)]})
    client = client_for(member)
    url = reverse(name, args=[running.pk]) + ("?keys=reward/mean" if name == "runs:series" else "")
    headers = {"HTTP_IF_NONE_MATCH": client.get(url)["ETag"]} if revalidated else {}
    cache.clear()  # what a server process pays for the first request after a write
    with django_assert_max_num_queries(most):
        assert client.get(url, **headers).status_code == (304 if revalidated else 200)
