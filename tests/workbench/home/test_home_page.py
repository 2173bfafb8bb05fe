"""The team home page through the Django test client on PostgreSQL: runs in flight with their step,
reward sparkline and alert; finished runs with their best metric; catalog changes; workers online with
the runs they hold; recipes. Another team's runs, items and held runs never appear."""

from __future__ import annotations

import re
from datetime import timedelta

import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext
from django.urls import reverse
from django.utils import timezone

from workbench.home.sparkline import HEIGHT, PAD, WIDTH, sparkline
from workbench.jobs.models import WorkerHeartbeat
from workbench.rewards.services import reward_definition_create
from workbench.runs.models import Run
from workbench.runs.telemetry.ingest import alerts_record, metrics_ingest
from workbench.runs.web.overview import sparkline_level
from workbench.toolschemas import services as toolschemas
from workbench.toolschemas.services import ToolSchemaContent

WORKER = "celery@gpu-box"
CALC = toolschemas.builtin_spec("calculator")


def make_run(team, user, name: str, status: str, **fields) -> Run:
    config = {"training": {"steps": 100}}
    return Run.objects.create(team=team, created_by=user, name=name, status=status, config=config, **fields)


def reward_series(run: Run, steps: int) -> None:
    metrics_ingest(run_id=run.pk, points=[(s, "reward/mean", 0.1 + 0.5 * s / steps) for s in range(steps)])


def calc_content() -> ToolSchemaContent:
    return ToolSchemaContent("calculator", CALC["description"], CALC["parameters"], "builtin", "calculator")


@pytest.fixture
def scene(team, member, other_team, outsider):
    """Each team with a live run on the same worker, a finished run and a catalog item."""
    live = make_run(team, member, "alpha-live", "running", worker=WORKER, started_at=timezone.now())
    reward_series(live, 30)
    alerts_record(
        run_id=live.pk,
        alerts=[
            {"step": 12, "rule": "std_collapse", "message": "within-group std fell", "severity": "warning"},
            {"step": 20, "rule": "entropy_drop", "message": "entropy fell by 70%", "severity": "critical"},
        ],
    )
    done = make_run(team, member, "alpha-done", "succeeded", finished_at=timezone.now())
    metrics_ingest(
        run_id=done.pk,
        points=[
            (0, "eval/greedy/accuracy", 0.4),
            (5, "eval/greedy/accuracy", 0.8),
            (9, "eval/greedy/accuracy", 0.7),
        ]
        + [(5, "eval/sampled/accuracy", 0.95)]
        + [(s, "reward/mean", 0.9) for s in range(10)],
    )
    version = toolschemas.tool_schema_create(
        team=team, user=member, name="alpha-calc", content=calc_content()
    )
    toolschemas.tool_schema_update(
        item=version.item, user=member, content=calc_content(), note="tighter schema"
    )
    reward_definition_create(
        team=team, user=member, name="alpha-reward", components=[{"name": "correctness"}]
    )

    theirs = make_run(other_team, outsider, "beta-live", "running", worker=WORKER, started_at=timezone.now())
    reward_series(theirs, 5)
    alerts_record(run_id=theirs.pk, alerts=[{"step": 3, "rule": "beta_rule", "message": "beta alert"}])
    make_run(other_team, outsider, "beta-done", "failed", finished_at=timezone.now())
    toolschemas.tool_schema_create(team=other_team, user=outsider, name="beta-calc", content=calc_content())

    WorkerHeartbeat.objects.create(
        hostname=WORKER,
        queues=["gpu", "cpu"],
        gpus=[{"index": 0, "name": "H100", "memory_gb": 80}],
        pid=1,
        started_at=timezone.now(),
        last_seen=timezone.now(),
    )
    return {"live": live, "done": done, "theirs": theirs}


def item_html(body: str, run: Run) -> str:
    match = re.search(rf'<li class="in-flight" data-run="{run.pk}">(.*?)</li>', body, re.S)
    assert match, f"{run.name} is not in flight on the page"
    return match.group(1)


def polyline(html: str) -> list[tuple[float, float]]:
    points = re.search(r'<polyline points="([^"]*)"', html).group(1)
    return [tuple(map(float, pair.split(","))) for pair in points.split()]


def test_a_running_run_shows_its_step_reward_sparkline_and_latest_alert(client_for, member, scene):
    body = client_for(member).get(reverse("home")).content.decode()
    live = item_html(body, scene["live"])
    assert "step 29 of 100" in live and f"on {WORKER}" in live
    points = polyline(live)
    assert len(points) == 30  # a short run: every logged point
    xs, ys = [x for x, _ in points], [y for _, y in points]
    assert xs == sorted(xs) and xs[0] == PAD and xs[-1] == WIDTH - PAD
    assert ys[0] == HEIGHT - PAD and ys[-1] == PAD  # a rising reward: lowest first, highest last
    assert "<strong>entropy_drop</strong> at step 20: entropy fell by 70%" in live  # the latest of two
    assert "(2 alerts)" in live and "alert-critical" in live


def test_a_long_run_draws_one_point_per_pyramid_bucket(client_for, member, team):
    run = make_run(team, member, "alpha-long", "running")
    reward_series(run, 1000)
    assert sparkline_level(999) == 3  # 4**3 = 64 steps per bucket: 16 points instead of 1000
    body = client_for(member).get(reverse("home")).content.decode()
    html = item_html(body, run)
    assert len(polyline(html)) == 16
    assert "over steps 63 to 999" in html  # each bucket's last point, through the run's last step


def test_queued_runs_come_after_running_ones_without_a_step(client_for, member, team, scene):
    queued = make_run(team, member, "alpha-queued", "queued")
    body = client_for(member).get(reverse("home")).content.decode()
    assert "no step yet" in item_html(body, queued) and "no reward/mean yet" in item_html(body, queued)
    assert body.index(f'data-run="{scene["live"].pk}"') < body.index(f'data-run="{queued.pk}"')


def test_finished_runs_show_their_best_metric(client_for, member, team, scene):
    reward_only = make_run(team, member, "alpha-reward-only", "cancelled", finished_at=timezone.now())
    metrics_ingest(run_id=reward_only.pk, points=[(0, "reward/mean", 0.2), (1, "reward/mean", 0.6)])
    body = client_for(member).get(reverse("home")).content.decode()
    finished = body.split('id="home-finished"')[1].split("</section>")[0]
    # eval accuracy as the evaluator logs it comes first where logged, greedy before sampled (its best,
    # not its last), else the reward
    assert (
        'best <code>eval/greedy/accuracy</code> <strong>0.800</strong> <span class="muted">at step 5'
        in finished
    )
    assert 'best <code>reward/mean</code> <strong>0.600</strong> <span class="muted">at step 1' in finished
    assert finished.index("alpha-reward-only") < finished.index("alpha-done")  # newest first


def test_catalog_changes_list_new_items_and_edits_with_a_diff_link(client_for, member, scene):
    body = client_for(member).get(reverse("home")).content.decode()
    catalog = body.split('id="home-catalog"')[1].split("</section>")[0]
    assert re.search(
        r"alpha-calc</a> v2\s*<a class=\"muted\" href=\"/catalog/[^\"]+/diff/1/2/\">diff</a>", catalog
    )
    assert "tighter schema" in catalog
    assert re.search(r"alpha-reward</a> v1\s*<span class=\"muted\">new</span>", catalog)
    assert (
        catalog.index("alpha-reward")
        < catalog.index("alpha-calc</a> v2")
        < catalog.index("alpha-calc</a> v1")
    )


def test_workers_online_show_their_gpus_and_the_teams_runs_they_hold(client_for, member, scene):
    WorkerHeartbeat.objects.create(
        hostname="celery@stale", queues=["cpu"], pid=2, started_at=timezone.now(), last_seen=timezone.now()
    )
    WorkerHeartbeat.objects.filter(hostname="celery@stale").update(
        last_seen=timezone.now() - timedelta(hours=1)
    )
    body = client_for(member).get(reverse("home")).content.decode()
    workers = body.split('id="home-workers"')[1].split("</section>")[0]
    assert WORKER in workers and "H100 (80 GB)" in workers and '<span class="tag">gpu</span>' in workers
    assert f'running <a href="/runs/{scene["live"].pk}/">alpha-live</a>' in workers
    assert "celery@stale" not in workers  # its heartbeat is older than the TTL


def test_another_teams_runs_items_and_held_runs_never_appear(client_for, member, outsider, scene):
    ours = client_for(member).get(reverse("home")).content.decode()
    theirs = client_for(outsider).get(reverse("home")).content.decode()
    for name in ("beta-live", "beta-done", "beta-calc", "beta alert", "beta_rule"):
        assert name not in ours
    for name in ("alpha-live", "alpha-done", "alpha-calc", "alpha-reward", "entropy_drop"):
        assert name not in theirs
    assert WORKER in theirs and "beta-live" in theirs  # the shared worker shows each team its own run
    live = client_for(outsider).get(reverse("home_live")).content.decode()
    assert "beta-live" in live and "alpha-live" not in live


def test_recipes_are_offered_to_members_not_viewers(client_for, member, viewer, scene):
    body = client_for(member).get(reverse("home")).content.decode()
    assert f'href="{reverse("runs:create")}?preset=torl"' in body
    assert 'id="home-recipes"' not in client_for(viewer).get(reverse("home")).content.decode()


def test_a_user_without_a_team_is_told_how_to_get_one(client_for, make_user):
    body = client_for(make_user("loner")).get(reverse("home")).content.decode()
    assert "You are not in a team yet" in body and 'id="home-live"' not in body


def test_the_page_polls_its_live_part_and_has_no_inline_script_or_style(client_for, member, scene):
    body = client_for(member).get(reverse("home")).content.decode()
    main = body.split("<main")[1].split("</main>")[0]
    assert f'hx-get="{reverse("home_live")}"' in main
    assert "<script" not in main and " style=" not in main
    live = client_for(member).get(reverse("home_live")).content.decode()
    assert 'id="home-in-flight"' in live and "<html" not in live
    assert body.count('id="home-finished"') == 1 and "hx-swap-oob" not in body


def test_the_live_part_carries_the_finished_runs_out_of_band(client_for, member, scene):
    """A run that finishes while the page is open moves from in flight to finished at the next poll."""
    live = scene["live"]
    live.status, live.finished_at = "succeeded", timezone.now()
    live.save(update_fields=["status", "finished_at"])
    body = client_for(member).get(reverse("home_live")).content.decode()
    finished = body.split('<section class="card" id="home-finished" hx-swap-oob="true">')[1].split(
        "</section>"
    )[0]
    assert "alpha-live" in finished and "alpha-done" in finished
    assert "best <code>reward/mean</code>" in finished
    assert "alpha-live" not in body.split('id="home-in-flight"')[1].split("</section>")[0]


def _home_queries(client) -> int:
    with CaptureQueriesContext(connection) as queries:
        assert client.get(reverse("home")).status_code == 200
    return len(queries)


def _add_runs(team, user, i: int) -> None:
    """A short running run with an alert (raw sparkline points), a long one (pyramid rows) and a
    finished one with a metric."""
    short = make_run(team, user, f"short{i}", "running", worker=WORKER)
    reward_series(short, 20)
    alerts_record(run_id=short.pk, alerts=[{"step": 1, "rule": "r", "message": "m"}])
    reward_series(make_run(team, user, f"long{i}", "running", worker=WORKER), 300)
    metrics_ingest(
        run_id=make_run(team, user, f"done{i}", "succeeded").pk, points=[(0, "eval/accuracy", 1.0)]
    )


def test_home_queries_do_not_grow_with_the_number_of_runs(client_for, member, team):
    client = client_for(member)
    _add_runs(team, member, 0)
    few = _home_queries(client)
    for i in range(1, 4):
        _add_runs(team, member, i)
    assert _home_queries(client) == few


@pytest.mark.parametrize(
    ("series", "expected"),
    [
        ([(0, 0.0), (10, 1.0), (20, 0.5)], "2.0,26.0 60.0,2.0 118.0,14.0"),
        ([(3, 0.5), (4, 0.5)], "2.0,14.0 118.0,14.0"),  # flat: mid-height
        ([(7, 1.5)], "60.0,14.0"),  # one point: in the middle
    ],
)
def test_sparkline_geometry(series, expected):
    line = sparkline(series)
    assert line.points == expected and line.count == len(series) and line.last == series[-1][1]
    assert sparkline([]) is None


def test_a_run_in_sft_shows_its_sft_progress_on_home_and_the_runs_list(client_for, member, team):
    """No RL step yet, but SFT is under way: "SFT 30/50" (steps done of planned), not "no step yet"."""
    in_sft = make_run(team, member, "alpha-sft", "running", worker=WORKER)
    metrics_ingest(
        run_id=in_sft.pk,
        points=[(s, "sft/progress", s / 50) for s in range(1, 31)],
        advance_step=False,
    )
    client = client_for(member)
    home = item_html(client.get(reverse("home")).content.decode(), in_sft)
    assert "SFT 30/50" in home and "no step yet" not in home
    assert "SFT 30/50" in item_html(client.get(reverse("home_live")).content.decode(), in_sft)
    listed = client.get(reverse("runs:list")).content.decode().split(">alpha-sft</a>")[1].split("</tr>")[0]
    assert '<td class="step">SFT 30/50</td>' in listed
    metrics_ingest(run_id=in_sft.pk, points=[(1, "reward/mean", 0.5)])  # RL began: its step is shown
    listed = client.get(reverse("runs:list")).content.decode().split(">alpha-sft</a>")[1].split("</tr>")[0]
    assert '<td class="step">1</td>' in listed
