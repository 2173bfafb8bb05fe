"""Prompt template pages: list, detail and form with a live htmx preview, create (from presets), edit."""

from django.core.exceptions import ValidationError
from django.shortcuts import redirect, render
from django.views.decorators.http import require_POST

from workbench.accounts.access import role_at_least, team_role_required
from workbench.accounts.models import Role
from workbench.catalog import pages
from workbench.datasets import selectors as dataset_selectors
from workbench.prompts import rendering, selectors, services
from workbench.prompts.forms import PreviewForm, PromptTemplateCreateForm, PromptTemplateForm

DEFAULT_QUESTION = rendering.SAMPLE_QUESTION


def prompt_template_list(request):
    context = {
        "items": selectors.prompt_template_list(user=request.user, team=request.team),
        "can_write": role_at_least(request.team_role, Role.MEMBER),
        "families": rendering.family_names(),
    }
    return render(request, "prompts/list.html", context)


def prompt_template_detail(request, pk: int):
    item = selectors.prompt_template_get(user=request.user, pk=pk)
    version = selectors.prompt_template_version_get(item=item, number=pages.requested_version(request))
    context = {
        **pages.detail_context(request, item=item, version=version),
        "can_preview": role_at_least(request.team_role, Role.MEMBER),  # as prompt_template_preview asks
        "preview_form": PreviewForm(user=request.user, team=item.team),
    }
    return render(request, "prompts/detail.html", context)


@team_role_required(Role.MEMBER)
def prompt_template_create(request):
    preset = request.GET.get("preset", "")
    initial = {}
    if preset in rendering.family_names():
        initial = {"name": preset, "family": preset, "source": rendering.family_source(preset)}
    form = PromptTemplateCreateForm(request.POST or None, initial=initial)
    if request.method == "POST" and form.is_valid():
        data = form.cleaned_data
        try:
            version = services.prompt_template_create(team=request.team, user=request.user, **data)
        except ValidationError as exc:
            form.add_error(None, exc)
        else:
            return redirect(version.item)
    return _form_page(request, form, item=None, team=request.team)


def prompt_template_edit(request, pk: int):
    item = pages.editable(selectors.prompt_template_get(user=request.user, pk=pk, min_role=Role.MEMBER))
    latest = item.latest_version()
    initial = {"family": latest.family, "source": latest.source, "description": latest.description}
    form = PromptTemplateForm(request.POST or None, initial=initial)
    if request.method == "POST" and form.is_valid():
        try:
            services.prompt_template_update(item=item, user=request.user, **form.cleaned_data)
        except ValidationError as exc:
            form.add_error(None, exc)
        else:
            return redirect(item)
    return _form_page(request, form, item=item, team=item.team)


def _form_page(request, form, *, item, team):
    context = {
        "form": form,
        "item": item,
        "families": rendering.family_names(),
        "preview_form": PreviewForm(user=request.user, team=team),
    }
    return render(request, "prompts/form.html", context)


@require_POST
@team_role_required(Role.MEMBER)
def prompt_template_preview(request):
    """htmx partial: render the posted source with a dataset row or question, tools and a tokenizer.

    Members only: rendering runs member-written templates (bounded, in a worker process)."""
    form = PreviewForm(request.POST, user=request.user)
    if not form.is_valid():
        return render(request, "prompts/_preview.html", {"form_errors": form.errors})
    data = form.cleaned_data
    question, observation = data["question"] or DEFAULT_QUESTION, None
    if data["dataset"] is not None:
        row = dataset_selectors.dataset_row_at(version=data["dataset"], index=data["row_index"] or 0)
        if row is None:
            error = f"{data['dataset'].item.name} v{data['dataset'].number} has no row {data['row_index']}"
            return render(request, "prompts/_preview.html", {"preview": rendering.Preview(error=error)})
        question, observation = row.prompt, rendering.observation_text(row.initial_state)
    preview = rendering.preview(
        family=request.POST.get("family", ""),
        source=request.POST.get("source", ""),
        question=question,
        tools=[version.spec() for version in data["tools"]],
        observation=observation,
        tokenizer=data["tokenizer"],
    )
    return render(request, "prompts/_preview.html", {"preview": preview})
