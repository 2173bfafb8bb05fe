"""Evaluation pages: list, Evaluate form, detail (metrics + trajectories), trajectory, leaderboard."""

from __future__ import annotations

import csv
import io
import json

from django.core.exceptions import ValidationError
from django.core.paginator import Paginator
from django.http import HttpResponse
from django.shortcuts import redirect, render

from workbench.accounts.access import get_scoped_or_404, role_at_least, team_role_required
from workbench.accounts.models import Role
from workbench.datasets.models import DatasetVersion
from workbench.runs.trajectories.filters import TrajectoryFilterForm

from . import selectors, services
from .forms import EvaluationForm
from .models import ModelSource

TRAJECTORIES_PER_PAGE = 50


def evaluation_list(request):
    context = {
        "evaluations": selectors.evaluation_list(user=request.user, team=request.team)[:200],
        "versions": selectors.leaderboard_versions(user=request.user, team=request.team),
        "can_write": role_at_least(request.team_role, Role.MEMBER),
    }
    return render(request, "evaluations/list.html", context)


def _initial(request) -> dict:
    """?checkpoint=<id> prefills the form from a run page (the run's dataset version too)."""
    initial = {}
    checkpoint_id = request.GET.get("checkpoint")
    if checkpoint_id:
        form = EvaluationForm(user=request.user, team=request.team)
        checkpoint = (
            form.fields["checkpoint"].queryset.filter(pk=checkpoint_id).first()
            if checkpoint_id.isdigit()
            else None
        )
        if checkpoint is not None:
            initial.update(source=ModelSource.CHECKPOINT, checkpoint=checkpoint.pk)
            if checkpoint.run.dataset_version_id is not None:
                initial["dataset_version"] = checkpoint.run.dataset_version_id
    return initial


@team_role_required(Role.MEMBER)
def evaluation_create(request):
    form = EvaluationForm(
        request.POST or None, user=request.user, team=request.team, initial=_initial(request)
    )
    if request.method == "POST" and form.is_valid():
        try:
            evaluation = services.evaluation_create(
                team=request.team, user=request.user, **form.service_kwargs()
            )
        except ValidationError as exc:
            form.add_service_errors(exc.message_dict)
        else:
            return redirect(evaluation)
    return render(request, "evaluations/form.html", {"form": form}, status=400 if form.errors else 200)


def evaluation_detail(request, pk: int):
    evaluation = selectors.evaluation_get(user=request.user, pk=pk)
    form = TrajectoryFilterForm(request.GET)
    page = None
    if form.is_valid():
        trajectories = selectors.trajectory_list(
            evaluation=evaluation, filters=form.filters(), sort=form.cleaned_data.get("sort") or ""
        )
        page = Paginator(trajectories, TRAJECTORIES_PER_PAGE).get_page(request.GET.get("page"))
    context = {
        "evaluation": evaluation,
        "form": form,
        "page": page,
        "metrics": sorted(evaluation.metrics.items()),
        "config_json": json.dumps(evaluation.config, indent=2, sort_keys=True),
    }
    template = "evaluations/_body.html" if request.htmx else "evaluations/detail.html"
    return render(request, template, context)


def trajectory_detail(request, pk: int, tid: int):
    evaluation = selectors.evaluation_get(user=request.user, pk=pk)
    record = selectors.trajectory_get(evaluation=evaluation, pk=tid)
    context = {"evaluation": evaluation, "record": record, "data": record.data}
    return render(request, "evaluations/trajectory.html", context)


def leaderboard(request, version_pk: int):
    version = get_scoped_or_404(DatasetVersion.objects.select_related("item"), request.user, version_pk)
    rows, sort = selectors.leaderboard(
        user=request.user, version=version, sort=request.GET.get("sort", selectors.DEFAULT_SORT)
    )
    columns = selectors.LEADERBOARD_COLUMNS
    if request.GET.get("format") == "csv":
        return _csv(version, rows, columns)
    table = [(row, [column.value(row) for column in columns]) for row in rows]
    context = {"version": version, "table": table, "columns": columns, "sort": sort}
    return render(request, "evaluations/leaderboard.html", context)


def _cell(value):
    """A CSV cell; text a spreadsheet would run as a formula (a name starting =, +, -, @) is quoted with '."""
    if value is None:
        return ""
    if isinstance(value, str) and value[:1] in ("=", "+", "-", "@", "\t", "\r"):
        return "'" + value
    return value


def _csv(version, rows, columns) -> HttpResponse:
    buffer = io.StringIO()
    writer = csv.writer(buffer)
    writer.writerow(["evaluation_id", *(column.key for column in columns)])
    for row in rows:
        values = [column.value(row) for column in columns]
        writer.writerow([row.pk, *(_cell(value) for value in values)])
    response = HttpResponse(buffer.getvalue(), content_type="text/csv")
    name = f"leaderboard-{version.item.name}-v{version.number}.csv".replace('"', "")
    response["Content-Disposition"] = f'attachment; filename="{name}"'
    return response
