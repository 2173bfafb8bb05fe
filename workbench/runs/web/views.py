"""Run pages: list, new (from a preset or a clone), dashboard, status polling, inspector, compare."""

from __future__ import annotations

import json
from functools import partial
from typing import NamedTuple

from django.core.exceptions import ValidationError
from django.core.paginator import Paginator
from django.http import HttpResponse
from django.shortcuts import redirect, render
from django.template.loader import render_to_string
from django.views.decorators.http import require_POST

from trainers.workbench_api import RunConfig
from workbench.accounts.access import (
    request_role_for_team_id,
    role_at_least,
    role_for_team_id,
    team_role_required,
)
from workbench.accounts.models import Role

from .. import selectors, services
from ..execution.placement import run_gpu_wait_note, run_gpus_asked
from ..models import Run, RunStatus
from ..telemetry.series import series_keys, series_keys_union, sft_progress_by_run
from ..trajectories.agent import agent_episode
from ..trajectories.filters import TrajectoryFilterForm
from .compare import compare_summary, config_diff, run_ids_param
from .forms import RunForm, RunMetaForm
from .freshness import cached, data_version, shared_response, status_version
from .recipes import recipe_choices, recipe_start
from .tokens import SHADINGS, has_entropies, turn_pieces

COMPARE_CHOICES = 50  # the newest runs the compare page's picker offers


def run_list(request):
    runs = selectors.run_list(
        user=request.user,
        team=request.team,
        status=request.GET.get("status", ""),
        tag=request.GET.get("tag", ""),
        search=request.GET.get("q", ""),
    )
    page = Paginator(runs, 50).get_page(request.GET.get("page"))
    context = {
        "page": page,
        "sft": sft_progress_by_run(run_ids=[run.pk for run in page.object_list if run.last_step is None]),
        "statuses": RunStatus.values,
        "recipes": recipe_choices(),
        "can_write": role_at_least(request.team_role, Role.MEMBER),
        "query": _without(request.GET, "page"),
    }
    return render(request, "runs/list.html", context)


class FormStart(NamedTuple):
    """What the new-run form opens with: config, initial identity and pin fields, the run it clones, and
    a note on what is missing (the demo catalog, for the demo recipe)."""

    config: dict
    initial: dict
    source: Run | None
    note: str = ""


def _initial_config(request) -> FormStart:
    """The form's start from ?preset= (a recipe) or ?clone= (a run); the defaults otherwise."""
    clone_id = request.GET.get("clone")
    if clone_id:
        source = selectors.run_get(user=request.user, pk=clone_id)
        initial = services.run_clone_initial(run=source)
        return FormStart(initial.pop("config"), initial, source)
    name = request.GET.get("preset", "")
    start = recipe_start(name, request.team)
    if start is not None:
        return FormStart(start.config, {"name": name, **start.pins}, None, start.note)
    return FormStart(RunConfig().model_dump(mode="json"), {}, None)


@team_role_required(Role.MEMBER)
def run_create(request):
    config, initial, source, note = _initial_config(request)
    form = RunForm(request.POST or None, user=request.user, team=request.team, config=config, initial=initial)
    # "Apply YAML" only fills the form from the pasted config; Launch (with or without YAML) launches
    if request.method == "POST" and not form.applies_yaml:
        run = _launch(request, form, source)
        if run is not None:
            return redirect(run)
    context = {
        "form": form,
        "recipes": recipe_choices(),
        "preset": request.GET.get("preset", ""),
        "recipe_note": note,
        "source": source,
        "query": request.GET.urlencode(),
    }
    return render(request, "runs/form.html", context, status=400 if form.errors else 200)


def _launch(request, form: RunForm, source: Run | None) -> Run | None:
    """The run the form creates; None with every error on the form: those of its own checks and, for the
    fields they passed, run_create's (one submit shows all). A pasted YAML that failed is its only error."""
    if not form.is_valid():
        if not form.yaml_errors:
            form.add_service_errors(services.run_create_check(team=request.team, **form.checked_kwargs())[1])
        return None
    try:
        return services.run_create(
            team=request.team, user=request.user, cloned_from=source, **form.service_kwargs()
        )
    except ValidationError as exc:
        form.add_service_errors(exc.message_dict)
        return None


@require_POST
@team_role_required(Role.MEMBER)
def run_config_yaml(request):
    """The new-run form's "current config" YAML for the values posted (js/runs/form.js shows it as fields
    change); the query names the preset or clone the form started from, whose values stand in for invalid
    ones."""
    config, initial, _, _ = _initial_config(request)
    form = RunForm(request.POST, user=request.user, team=request.team, config=config, initial=initial)
    return render(request, "runs/_config_yaml_out.html", {"form": form})


def run_detail(request, pk: int):
    run = selectors.run_get(user=request.user, pk=pk)
    tags = list(run.tags.all())
    meta = RunMetaForm(
        initial={
            "name": run.name,
            "notes": run.notes,
            "tags": ", ".join(t.name for t in tags),
            "is_baseline": run.is_baseline,
        }
    )
    context = {
        "run": run,
        "tags": tags,
        "meta_form": meta,
        "alerts": run.alerts.all(),
        "checkpoints": run.checkpoints.all(),
        "keys": series_keys(run=run),
        "config_json": json.dumps(run.config, indent=2, sort_keys=True),
        "can_write": role_at_least(role_for_team_id(request.user, run.team_id), Role.MEMBER),
        "gpus_asked": run_gpus_asked(run),
        "gpu_wait": run_gpu_wait_note(run=run),
    }
    return render(request, "runs/detail.html", context)


def run_status(request, pk: int):
    """The status strip, polled by htmx while the run is live (it stops polling once finished), with the
    alerts and checkpoints swapped in out of band: 304 while it would show the same, else rendered once
    per change for every viewer of the same role."""
    run = selectors.run_get(user=request.user, pk=pk)
    can_write = role_at_least(request_role_for_team_id(request, run.team_id), Role.MEMBER)
    context = {
        "run": run,
        "alerts": run.alerts.all(),
        "checkpoints": run.checkpoints.all(),
        "can_write": can_write,  # checkpoints offer Evaluate to members
    }
    render_poll = partial(render_to_string, "runs/_status_poll.html", context)
    return shared_response(request, status_version(run, can_write), render_poll, "text/html; charset=utf-8")


@require_POST
def run_cancel(request, pk: int):
    run = selectors.run_get(user=request.user, pk=pk, min_role=Role.MEMBER)
    run = services.run_cancel(run=run, user=request.user)
    if request.htmx:
        return render(request, "runs/_status.html", {"run": run})
    return redirect(run)


@require_POST
def run_edit(request, pk: int):
    run = selectors.run_get(user=request.user, pk=pk, min_role=Role.MEMBER)
    form = RunMetaForm(request.POST)
    if form.is_valid():
        data = form.cleaned_data
        services.run_update(
            run=run,
            user=request.user,
            name=data["name"],
            notes=data["notes"],
            tags=data["tags"].split(","),
            is_baseline=data["is_baseline"],
        )
    return redirect(run)


def trajectory_list(request, pk: int):
    """The inspector's list; its rows are rendered once per stored batch and query for every reader."""
    run = selectors.run_get(user=request.user, pk=pk)
    form = TrajectoryFilterForm(request.GET)
    version = data_version(run, "trajectory rows", sorted(request.GET.lists()))
    rows = cached(version, lambda: _trajectory_rows(run, form, query=_without(request.GET, "cursor")))
    if request.htmx:
        return HttpResponse(rows)
    return render(request, "runs/trajectories.html", {"run": run, "form": form, "rows": rows})


def _trajectory_rows(run, form: TrajectoryFilterForm, query: str) -> str:
    page = None
    if form.is_valid():
        sort = form.cleaned_data.get("sort") or "-reward"
        page = selectors.trajectory_list(
            run=run, filters=form.filters(), sort=sort, cursor=form.cleaned_data.get("cursor") or ""
        )
    return render_to_string("runs/_trajectory_rows.html", {"run": run, "page": page, "query": query})


def trajectory_detail(request, pk: int, tid: int):
    run = selectors.run_get(user=request.user, pk=pk)
    record = selectors.trajectory_get(run=run, pk=tid)
    turns = record.data.get("turns", [])
    shade = request.GET.get("shade") if request.GET.get("shade") in SHADINGS else ""
    context = {
        "run": run,
        "record": record,
        "data": record.data,
        "agent": agent_episode(record.data),
        "shade": shade,
        "pieces": turn_pieces(run, turns, by=shade) if shade else None,
        "has_entropies": has_entropies(turns),
    }
    return render(request, "runs/trajectory.html", context)


def trajectory_group(request, pk: int, step: int, group: str):
    run = selectors.run_get(user=request.user, pk=pk)
    records = selectors.trajectory_group(run=run, step=step, group_id=group)
    context = {
        "run": run,
        "records": records,
        "step": step,
        "group": group,
        "anchors": selectors.anchor_state_groups(records),
    }
    return render(request, "runs/group.html", context)


def run_compare(request):
    runs = selectors.runs_for_compare(
        user=request.user, ids=run_ids_param(request.GET.getlist("runs")), tag=request.GET.get("tag", "")
    )
    keys = series_keys_union(runs=runs)
    context = {
        "runs": runs,
        "keys": keys,
        "key": request.GET.get("key")
        or ("reward/mean" if "reward/mean" in keys else (keys[0] if keys else "")),
        "diff": config_diff([run.config for run in runs]),
        "summary": compare_summary(runs),
        "run_ids": ",".join(str(run.pk) for run in runs),
        "group": request.GET.get("group", ""),
        "choices": selectors.run_list(user=request.user, team=request.team)[:COMPARE_CHOICES],
        "same_prompt": selectors.trajectories_same_prompt(runs=runs, row=request.GET.get("group", "")),
    }
    return render(request, "runs/compare.html", context)


def _without(query, name: str) -> str:
    params = query.copy()
    params.pop(name, None)
    return params.urlencode()
