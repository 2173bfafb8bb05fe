"""Runs pages through the Django test client: team isolation, the generated form, charts, escaping."""

from __future__ import annotations

import asyncio
import json

import pytest
from django import forms
from django.urls import reverse

from trainers.config import PRESETS, RunConfig, preset_config
from trainers.trajectory import ToolCall
from workbench.runs.models import Run
from workbench.runs.telemetry.ingest import alerts_record, metrics_ingest, trajectories_ingest
from workbench.runs.web.config_form import flatten, schema_fields

HOSTILE = '<script>alert("x")</script><img src=x onerror="alert(1)">'


def form_post(config: dict, **identity) -> dict:
    """What the browser posts for `config`: one value per generated field, JSON for the JSON fields."""
    fields = schema_fields()
    data = {"name": "r1", "queue": "cpu", "notes": "", "tags": "", **identity}
    for path, value in flatten(config, fields).items():
        if isinstance(fields[path], forms.JSONField):
            data[path] = json.dumps(value)
        elif isinstance(value, bool):
            if value:
                data[path] = "on"
        else:
            data[path] = "" if value is None else value
    return data


@pytest.mark.parametrize(
    "name",
    [
        "runs:detail",
        "runs:status",
        "runs:series",
        "runs:trajectories",
        "runs:export_metrics",
        "runs:export_trajectories",
    ],
)
def test_another_teams_run_answers_404(client_for, outsider, run, name):
    assert client_for(outsider).get(reverse(name, args=[run.pk])).status_code == 404


def test_list_shows_only_the_teams_runs(client_for, member, run, other_run):
    body = client_for(member).get(reverse("runs:list")).content.decode()
    assert run.name in body and other_run.name not in body


def test_new_run_form_is_generated_from_the_schema(client_for, member):
    body = client_for(member).get(reverse("runs:create") + "?preset=toolrl").content.decode()
    assert 'name="rollout.samples_per_prompt"' in body and 'name="algorithm.estimator"' in body


def test_invalid_value_is_shown_on_its_field(client_for, member):
    config = RunConfig().model_dump(mode="json")
    config["algorithm"]["eps"] = 0.0  # the schema says > 0: only the trainers validation catches it
    response = client_for(member).post(reverse("runs:create"), form_post(config))
    assert response.status_code == 400
    assert response.context["form"].errors["algorithm.eps"]
    assert not Run.objects.exists()


def test_valid_post_creates_and_launches(client_for, member, prompts, django_capture_on_commit_callbacks):
    config = RunConfig().model_dump(mode="json")
    config["rollout"]["samples_per_prompt"] = 4
    data = form_post(config, name="four", dataset_version=prompts.pk)
    with django_capture_on_commit_callbacks(execute=False) as callbacks:
        response = client_for(member).post(reverse("runs:create"), data)
    run = Run.objects.get(name="four")
    assert response.status_code == 302 and response["Location"] == run.get_absolute_url()
    assert (run.config["rollout"]["samples_per_prompt"], len(callbacks)) == (4, 1)


def test_series_endpoint_keeps_a_spike(client_for, member, run):
    metrics_ingest(
        run_id=run.pk, points=[(s, "loss/grad_norm", 50.0 if s == 3210 else 1.0) for s in range(5000)]
    )
    url = reverse("runs:series", args=[run.pk]) + "?keys=loss/grad_norm&buckets=50"
    series = client_for(member).get(url).json()["series"]["loss/grad_norm"]
    assert dict(zip(series["x"], series["y"], strict=True))[3210] == 50.0


@pytest.mark.parametrize(
    ("query", "message"),
    [
        ("step_max=inf", "step_max must be a finite number"),
        ("step_max=-inf", "step_max must be a finite number"),
        ("step_min=nan", "step_min must be a finite number"),
        ("step_max=ten", "step_max must be a number"),
        ("step_min=1e30", "step_min must be between"),
    ],
)
def test_series_endpoint_refuses_a_bad_step_bound_with_400(client_for, member, run, query, message):
    url = reverse("runs:series", args=[run.pk]) + f"?keys=loss/grad_norm&{query}"
    response = client_for(member).get(url)
    assert response.status_code == 400
    assert response.json()["error"].startswith(message)


def test_series_endpoint_ignores_an_infinite_bucket_count(client_for, member, run):
    url = reverse("runs:series", args=[run.pk]) + "?keys=loss/grad_norm&buckets=inf&step_max=10.5"
    assert client_for(member).get(url).status_code == 200


def test_trajectory_text_is_escaped(client_for, member, run, make_trajectory):
    trajectories_ingest(run_id=run.pk, batches={1: [make_trajectory("g0", 0, text=HOSTILE)]})
    record = run.trajectories.get()
    for url in (
        reverse("runs:trajectory", args=[run.pk, record.pk]),
        reverse("runs:group", args=[run.pk, 1, "g0"]),
        reverse("runs:trajectories", args=[run.pk]) + "?step=1",
    ):
        body = client_for(member).get(url).content.decode()
        assert "<script>alert" not in body and "<img src=x" not in body
        assert "&lt;script&gt;" in body


def test_compare_shows_config_differences(client_for, member, run, team, snapshot):
    changed = {**snapshot, "seed": 7}
    other = Run.objects.create(team=team, created_by=member, name="seed7", config=changed, is_baseline=True)
    body = client_for(member).get(reverse("runs:compare") + f"?runs={run.pk},{other.pk}").content.decode()
    assert "<code>seed</code>" in body and "baseline" in body


def test_compare_names_each_runs_latest_alert(client_for, member, run, team, snapshot):
    collapsed = Run.objects.create(team=team, created_by=member, name="collapsed", config=snapshot)
    quiet = Run.objects.create(team=team, created_by=member, name="quiet", config=snapshot)
    alerts_record(run_id=run.pk, alerts=[{"step": 3, "rule": "grad_spike", "message": "grad norm x9"}])
    alerts_record(
        run_id=collapsed.pk,
        alerts=[
            {"step": 9, "rule": "echo_trap", "message": "reward fell", "severity": "critical"},
            {"step": 4, "rule": "std_collapse", "message": "groups agree"},
        ],
    )
    url = reverse("runs:compare") + f"?runs={run.pk}&runs={collapsed.pk}&runs={quiet.pk}"
    response = client_for(member).get(url)
    summary = {
        s.run.name: (s.alert and (s.alert.rule, s.alert.step), s.alert_count)
        for s in response.context["summary"]
    }
    assert summary == {"demo": (("grad_spike", 3), 1), "collapsed": (("echo_trap", 9), 2), "quiet": (None, 0)}
    body = response.content.decode()
    assert '<strong>echo_trap</strong> at step 9</a> <span class="muted">(2 alerts)</span>' in body
    assert f'href="/runs/{collapsed.pk}/#alerts" title="reward fell"' in body


def test_compare_ignores_other_teams_runs(client_for, member, run, other_run):
    response = client_for(member).get(reverse("runs:compare") + f"?runs={run.pk},{other_run.pk}")
    assert [r.pk for r in response.context["runs"]] == [run.pk]


def _compared_runs(team, member, snapshot, make_trajectory, count: int) -> list[Run]:
    """`count` runs with both summary series, stored trajectories of one shared row, and a config diff."""
    runs = []
    for i in range(count):
        run = Run.objects.create(
            team=team, created_by=member, name=f"r{i}", config={**snapshot, "seed": i}, is_baseline=i == 0
        )
        metrics_ingest(
            run_id=run.pk,
            points=[(0, "reward/mean", 0.9), (1, "reward/mean", 0.1 * i), (1, "eval/sampled/accuracy", 0.5)],
        )
        trajectories_ingest(
            run_id=run.pk,
            batches={
                1: [make_trajectory("row7", 0, text="old step")],
                2: [make_trajectory("row7", s, correct=s == 0, text=f"run {i} sample {s}") for s in (0, 1)],
            },
        )
        runs.append(run)
    return runs


def _compare_queries(client, runs: list[Run]) -> tuple[int, object]:
    from django.db import connection
    from django.test.utils import CaptureQueriesContext

    url = reverse("runs:compare") + "?runs=" + ",".join(str(r.pk) for r in runs) + "&group=row7"
    with CaptureQueriesContext(connection) as queries:
        response = client.get(url)
    assert response.status_code == 200
    return len(queries), response


def test_compare_queries_do_not_grow_with_the_number_of_runs(
    client_for, member, team, snapshot, make_trajectory
):
    client = client_for(member)
    client.get(reverse("runs:list"))  # session, user and membership lookups warmed like any later page
    few, _ = _compare_queries(client, _compared_runs(team, member, snapshot, make_trajectory, 2))
    Run.objects.all().delete()
    runs = _compared_runs(team, member, snapshot, make_trajectory, 6)
    many, response = _compare_queries(client, runs)
    assert many == few, f"{few} queries for 2 runs, {many} for 6"
    # Each kind of data is still right for every run after the aggregation.
    summary = {s.run.name: s for s in response.context["summary"]}
    assert summary["r5"].final["reward/mean"] == pytest.approx(0.5)
    # The evaluator's accuracy as the sink stores it (greedy evaluation off): shown as the run's final one.
    assert summary["r5"].eval_accuracy == ("eval/sampled/accuracy", 0.5)
    assert '0.500 <span class="muted">sampled/accuracy</span>' in response.content.decode()
    assert summary["r5"].best["reward/mean"] == pytest.approx(0.9)
    assert summary["r3"].tool_calls_per_solved == 1.5  # three one-call samples, two of them solved
    assert response.context["keys"] == ["eval/sampled/accuracy", "reward/mean"]
    same = response.context["same_prompt"]
    assert [run.pk for run, _ in same] == [run.pk for run in runs]
    assert [(t.step, t.sample_index) for t in same[4][1]] == [(2, 0), (2, 1)]
    assert "run 4 sample 1" in response.content.decode()


def test_metrics_csv_export(client_for, member, run):
    metrics_ingest(run_id=run.pk, points=[(0, "reward/mean", 0.5), (1, "reward/mean", 0.75)])
    response = client_for(member).get(reverse("runs:export_metrics", args=[run.pk]))
    assert b"".join(response.streaming_content).decode().splitlines() == [
        "step,key,value",
        "0,reward/mean,0.5",
        "1,reward/mean,0.75",
    ]


def test_cancel_from_the_page(client_for, member, run):
    client_for(member).post(reverse("runs:cancel", args=[run.pk]))
    run.refresh_from_db()
    assert run.status == "cancelled"


@pytest.mark.parametrize("entry", ["row7", "7", " row7 ", "4.0.1:row7"])
def test_compare_finds_a_dataset_row_in_every_run_and_shows_its_prompt_and_responses(
    client_for, member, run, team, snapshot, make_trajectory, entry
):
    """The loop names groups "<step>.<round>.<index>:<row id>": a reader asks for the row (`row7`, `7`,
    or any group id of it) and gets each run's latest group of that row, its prompt and every response."""
    other = Run.objects.create(team=team, created_by=member, name="other", config=snapshot)
    never = Run.objects.create(team=team, created_by=member, name="never", config=snapshot)
    trajectories_ingest(
        run_id=run.pk,
        batches={
            1: [make_trajectory("1.0.2:row7", 0, text="an older step")],
            3: [make_trajectory("3.0.0:row7", s, text=f"first run sample {s}") for s in (0, 1)]
            + [make_trajectory("3.0.1:row17", 0, text="another row")],
        },
    )
    trajectories_ingest(run_id=other.pk, batches={9: [make_trajectory("9.1.4:row7", 0, text="second run")]})
    trajectories_ingest(run_id=never.pk, batches={9: [make_trajectory("9.0.0:row70", 0, text="row 70")]})
    url = reverse("runs:compare") + f"?runs={run.pk},{other.pk},{never.pk}&group={entry}"
    response = client_for(member).get(url)
    same = response.context["same_prompt"]
    assert [(t.step, t.group_id, t.sample_index) for t in same[0].records] == [
        (3, "3.0.0:row7", 0),
        (3, "3.0.0:row7", 1),
    ]
    assert [(t.step, t.group_id) for t in same[1].records] == [(9, "9.1.4:row7")]
    assert same[2].records == [] and same[0].prompt == "What is 2+2?"
    body = response.content.decode()
    boxes = body.split('id="same-prompt-runs"')[1].split("<article")[1:]
    for box in boxes[:2]:
        assert "What is 2+2?" in box and "&lt;tool_call&gt;" in box  # the prompt and every turn
    assert "first run sample 0" in boxes[0] and "first run sample 1" in boxes[0]
    assert "an older step" not in body and "another row" not in body
    assert "second run" in boxes[1] and "row 70" not in body
    assert "This run has no trajectory of row" in boxes[2]


def test_form_refuses_another_teams_catalog_version(client_for, outsider, member, team):
    from workbench.rewards.services import reward_definition_create

    version = reward_definition_create(
        team=team, user=member, name="theirs", components=[{"name": "correctness"}]
    )
    data = form_post(RunConfig().model_dump(mode="json"), reward_version=version.pk)
    response = client_for(outsider).post(reverse("runs:create"), data)
    assert response.status_code == 400 and response.context["form"].errors["reward_version"]
    assert not Run.objects.exists()


def test_viewer_reads_but_cannot_launch_or_cancel(client_for, viewer, run):
    client = client_for(viewer)
    assert client.get(run.get_absolute_url()).status_code == 200
    assert client.post(reverse("runs:cancel", args=[run.pk])).status_code == 403
    assert client.get(reverse("runs:create")).status_code in (302, 403)


def test_tokens_shaded_by_probability_with_the_runs_tokenizer(
    client_for, member, run, make_trajectory, tmp_path
):
    from trainers.models.tiny import build_tokenizer

    tokenizer = build_tokenizer(["The answer is 4.", "<b>bold</b>"] * 50, vocab_size=300)
    tokenizer.save_pretrained(tmp_path)
    run.config = {**run.config, "model": {**run.config["model"], "path": str(tmp_path)}}
    run.save()
    traj = make_trajectory("g0", 0)
    ids = tokenizer.encode("<b>bold</b>", add_special_tokens=False)
    traj.turns[3].text, traj.turns[3].token_ids = "<b>bold</b>", ids
    traj.turns[3].loss_mask, traj.turns[3].logprobs = [1] * len(ids), [-0.1] * len(ids)
    trajectories_ingest(run_id=run.pk, batches={1: [traj]})
    url = reverse("runs:trajectory", args=[run.pk, run.trajectories.get().pk]) + "?shade=logprob"
    body = client_for(member).get(url).content.decode()
    assert 'title="logprob -0.100"' in body and "<b>" not in body


@pytest.mark.parametrize("preset", sorted(PRESETS.names()))
def test_every_preset_round_trips_through_the_generated_form(
    client_for, team, member, prompts, preset, django_capture_on_commit_callbacks
):
    from tests.workbench.support.datasets import conversations_version

    config = preset_config(preset).model_dump(mode="json")
    pins = {"dataset_version": prompts.pk}
    if config["sft"] is not None:
        pins["sft_dataset_version"] = conversations_version(team, member).pk
    with django_capture_on_commit_callbacks(execute=False):
        response = client_for(member).post(reverse("runs:create"), form_post(config, name=preset, **pins))
    assert response.status_code == 302, response.context["form"].errors
    stored = Run.objects.get(name=preset).config
    assert {k: v for k, v in stored.items() if k not in ("name", "output_dir")} == {
        k: v for k, v in config.items() if k not in ("name", "output_dir")
    }


@pytest.mark.parametrize(
    "query",
    [
        "runs={a},{b}",  # the shareable address
        "runs={a}&runs={b}",  # what a form with one box per run submits
        "runs=&runs={a}&runs={b},{a}",  # an empty hidden field, then mixed forms, a repeat
        "runs={a}&runs=%C2%B2&runs=99999999999999999999999&runs=x&runs={b}",  # junk is skipped, not a 500
    ],
)
def test_compare_reads_both_query_forms(client_for, member, run, team, snapshot, query):
    other = Run.objects.create(team=team, created_by=member, name="other", config=snapshot)
    metrics_ingest(run_id=run.pk, points=[(0, "reward/mean", 0.1)])
    metrics_ingest(run_id=other.pk, points=[(0, "reward/mean", 0.2)])
    client = client_for(member)
    params = query.format(a=run.pk, b=other.pk)
    page = client.get(reverse("runs:compare") + "?" + params)
    assert [r.pk for r in page.context["runs"]] == [run.pk, other.pk]
    curves = client.get(reverse("runs:compare_series") + f"?{params}&key=reward/mean").json()["runs"]
    assert [(c["id"], c["y"]) for c in curves] == [(run.pk, [0.1]), (other.pk, [0.2])]


def test_compare_picker_offers_the_teams_runs_and_submits_one_field_per_run(
    client_for, member, run, team, snapshot, other_run
):
    other = Run.objects.create(team=team, created_by=member, name="other", config=snapshot)
    body = client_for(member).get(reverse("runs:compare") + f"?runs={run.pk}").content.decode()
    picker = body.split('id="run-picker"')[1].split("</details>")[0]
    assert f'name="runs" value="{run.pk}" checked' in picker
    assert f'name="runs" value="{other.pk}" >' in picker
    assert other_run.name not in picker  # another team's run is not offered


def _shaded_trajectory(run, make_trajectory, tmp_path, *, entropies):
    """A stored trajectory whose last turn is "<b>bold</b>" in the run's own tokenizer, with logprobs."""
    from trainers.models.tiny import build_tokenizer

    tokenizer = build_tokenizer(["The answer is 4.", "<b>bold</b>"] * 50, vocab_size=300)
    tokenizer.save_pretrained(tmp_path)
    run.config = {**run.config, "model": {**run.config["model"], "path": str(tmp_path)}}
    run.save()
    traj = make_trajectory("g0", 0)
    ids = tokenizer.encode("<b>bold</b>", add_special_tokens=False)
    turn = traj.turns[3]
    turn.text, turn.token_ids, turn.loss_mask = "<b>bold</b>", ids, [1] * len(ids)
    turn.logprobs = [-0.1] * len(ids)
    turn.entropies = entropies(len(ids))
    trajectories_ingest(run_id=run.pk, batches={1: [traj]})
    return reverse("runs:trajectory", args=[run.pk, run.trajectories.get().pk]), len(ids)


def test_inspector_shades_tokens_by_their_stored_entropy(client_for, member, run, make_trajectory, tmp_path):
    url, n = _shaded_trajectory(
        run, make_trajectory, tmp_path, entropies=lambda n: [0.0, 2.0, 9.0] + [1.0] * (n - 3)
    )
    client = client_for(member)
    body = client.get(url + "?shade=entropy").content.decode()
    assert '<pre class="text tokens by-entropy">' in body
    spans = body.split('<pre class="text tokens by-entropy">')[1].split("</pre>")[0].split("<span ")[1:]
    assert len(spans) == n
    # 0 nats: no shade; 2 of the 4-nat scale: half; 9 nats: the darkest
    assert [span.split('"')[1] for span in spans[:3]] == ["shade-0", "shade-5", "shade-10"]
    assert 'title="logprob -0.100 · entropy 9.000 nats"' in body
    assert "<b>" not in body and " style=" not in body  # text stays text; shades are classes
    by_prob = client.get(url + "?shade=logprob").content.decode()
    assert '<pre class="text tokens by-logprob">' in by_prob
    assert by_prob.count('class="shade-1"') == n  # p = exp(-0.1) = 0.905: 1 - p rounds to 1 of 10
    assert 'href="?shade=entropy">by entropy</a>' in by_prob


def test_inspector_shades_every_assistant_turn_including_the_tool_calling_one(
    client_for, member, run, make_trajectory, tmp_path
):
    """The rollout engine keeps a call's results on the assistant turn that made it; that turn's sampled
    tokens are shaded like the last turn's, not hidden behind "as the model saw it"."""
    from trainers.models.tiny import build_tokenizer

    tokenizer = build_tokenizer(["<tool_call>calc</tool_call>", "The answer is 4."] * 50, vocab_size=300)
    tokenizer.save_pretrained(tmp_path)
    run.config = {**run.config, "model": {**run.config["model"], "path": str(tmp_path)}}
    run.save()
    traj = make_trajectory("g0", 0)
    calling, tool, last = traj.turns[1], traj.turns[2], traj.turns[3]
    calling.tool_results, tool.tool_results = tool.tool_results, []  # where the engine puts them
    for turn, logprob in ((calling, -0.1), (last, -2.0)):
        turn.token_ids = tokenizer.encode(turn.text, add_special_tokens=False)
        turn.loss_mask, turn.logprobs = [1] * len(turn.token_ids), [logprob] * len(turn.token_ids)
    trajectories_ingest(run_id=run.pk, batches={1: [traj]})
    url = reverse("runs:trajectory", args=[run.pk, run.trajectories.get().pk])
    body = client_for(member).get(url + "?shade=logprob").content.decode()
    shaded = body.split('<pre class="text tokens by-logprob">')[1:]
    assert len(shaded) == 2  # both assistant turns, in order
    assert shaded[0].split("</pre>")[0].count('title="logprob -0.100"') == len(calling.token_ids)
    assert shaded[1].split("</pre>")[0].count('title="logprob -2.000"') == len(last.token_ids)
    assert "response from</span> <code>calculator</code>" in body  # the call's result is still shown


def test_inspector_says_when_a_trajectory_has_no_entropies(
    client_for, member, run, make_trajectory, tmp_path
):
    url, _ = _shaded_trajectory(run, make_trajectory, tmp_path, entropies=lambda n: None)
    body = client_for(member).get(url + "?shade=entropy").content.decode()
    assert "stored without per-token entropies" in body


def test_inspector_names_a_malformed_calls_tool_and_prints_its_error_once(
    client_for, member, run, make_trajectory
):
    from trainers.workbench_api import Toolset

    traj = make_trajectory("g0", 0)
    broken = '{"name": "calculator", "arguments": {2+2}}'
    call = ToolCall("", {}, broken, "invalid JSON: Expecting property name (line 1, column 37)")
    traj.turns[1].tool_calls = [call]
    traj.turns[2].tool_results = asyncio.run(Toolset.build(["calculator"]).call_many([call]))
    trajectories_ingest(run_id=run.pk, batches={1: [traj]})
    url = reverse("runs:trajectory", args=[run.pk, run.trajectories.get().pk])
    body = client_for(member).get(url).content.decode()
    assert "response from</span> <code>calculator</code>" in body
    assert body.count("malformed tool call: invalid JSON") == 1


def test_inspector_writes_counts_and_ground_truth_as_a_reader_would(client_for, member, run, make_trajectory):
    """One call, not "1 calls"; ground truth without the fields a row left empty (no "tool_calls: None")
    and with its values as JSON, not Python reprs."""
    one_call = make_trajectory("g0", 0)
    one_call.ground_truth = {"answer": "4", "tool_calls": None, "steps": [{"op": "add", "exact": True}]}
    trajectories_ingest(run_id=run.pk, batches={1: [one_call, make_trajectory("g0", 1, tools=())]})
    client = client_for(member)
    group = client.get(reverse("runs:group", args=[run.pk, 1, "g0"])).content.decode()
    assert "· 1 call</p>" in group.replace("\n", "") and "· 0 calls" in group and "1 calls" not in group
    record = run.trajectories.get(sample_index=0)
    page = client.get(reverse("runs:trajectory", args=[run.pk, record.pk])).content.decode()
    assert "answer: 4\n" in page and "tool_calls" not in page.split("Ground truth")[1]
    assert "steps: [{&quot;op&quot;: &quot;add&quot;, &quot;exact&quot;: true}]" in page
