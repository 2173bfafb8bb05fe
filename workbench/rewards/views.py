"""Reward definition pages: list, detail with "test on a sample", create and edit (a component formset)."""

from django.core.exceptions import ValidationError
from django.shortcuts import redirect, render
from django.views.decorators.http import require_POST

from workbench.accounts.access import role_at_least, team_role_required
from workbench.accounts.models import Role
from workbench.catalog import pages
from workbench.datasets import selectors as dataset_selectors
from workbench.rewards import selectors, services
from workbench.rewards.definitions import component_reference
from workbench.rewards.forms import (
    ComponentFormSet,
    RewardDefinitionCreateForm,
    RewardDefinitionForm,
    SampleForm,
)


def reward_definition_list(request):
    context = {
        "items": selectors.reward_definition_list(user=request.user, team=request.team),
        "can_write": role_at_least(request.team_role, Role.MEMBER),
    }
    return render(request, "rewards/list.html", context)


def reward_definition_detail(request, pk: int):
    item = selectors.reward_definition_get(user=request.user, pk=pk)
    version = selectors.reward_definition_version_get(item=item, number=pages.requested_version(request))
    context = {
        **pages.detail_context(request, item=item, version=version),
        "sample_form": SampleForm(user=request.user, team=item.team),
    }
    return render(request, "rewards/detail.html", context)


@team_role_required(Role.MEMBER)
def reward_definition_create(request):
    form = RewardDefinitionCreateForm(request.POST or None)
    formset = ComponentFormSet(request.POST or None, prefix="components")
    if request.method == "POST" and form.is_valid() and formset.is_valid():
        try:
            version = services.reward_definition_create(
                team=request.team, user=request.user, components=_components(formset), **form.cleaned_data
            )
        except ValidationError as exc:
            form.add_error(None, exc)
        else:
            return redirect(version.item)
    return _form_page(request, form, formset, item=None)


def reward_definition_edit(request, pk: int):
    item = pages.editable(selectors.reward_definition_get(user=request.user, pk=pk, min_role=Role.MEMBER))
    latest = item.latest_version()
    form = RewardDefinitionForm(request.POST or None, initial={"description": latest.description})
    initial = [{**c, "params": c.get("params") or {}} for c in latest.components]
    formset = ComponentFormSet(request.POST or None, prefix="components", initial=initial)
    if request.method == "POST" and form.is_valid() and formset.is_valid():
        try:
            services.reward_definition_update(
                item=item, user=request.user, components=_components(formset), **form.cleaned_data
            )
        except ValidationError as exc:
            form.add_error(None, exc)
        else:
            return redirect(item)
    return _form_page(request, form, formset, item=item)


def _components(formset) -> list[dict]:
    return [
        c for c in (f.component() for f in formset.forms if f.has_changed() or f.initial) if c is not None
    ]


def _form_page(request, form, formset, *, item):
    context = {"form": form, "formset": formset, "item": item, "reference": component_reference()}
    return render(request, "rewards/form.html", context)


@require_POST
def reward_definition_test(request, pk: int, number: int):
    """htmx partial: each component's score, its weight and the total for the posted sample."""
    item = selectors.reward_definition_get(user=request.user, pk=pk)
    version = selectors.reward_definition_version_get(item=item, number=number)
    form = SampleForm(request.POST, user=request.user)
    if not form.is_valid():
        return render(request, "rewards/_score.html", {"form_errors": form.errors})
    data = form.cleaned_data
    ground_truth = {k: v for k, v in (("answer", data["answer"]), ("tool_calls", data["tool_calls"])) if v}
    if data["dataset"] is not None:
        row = dataset_selectors.dataset_row_at(version=data["dataset"], index=data["row_index"] or 0)
        if row is None:
            return render(request, "rewards/_score.html", {"form_errors": {"row_index": ["No such row."]}})
        ground_truth = row.ground_truth()
    score = services.reward_definition_test(
        version=version,
        text=data["text"],
        ground_truth=ground_truth,
        template=data["template"],
        tool_results=data["tool_results"],
        step=data["step"],
        total_steps=data["total_steps"],
    )
    return render(request, "rewards/_score.html", {"score": score, "ground_truth": ground_truth})
