"""Agent program pages: list, detail, create, edit (every save a new version)."""

from django.core.exceptions import ValidationError
from django.shortcuts import redirect, render

from workbench.accounts.access import role_at_least, team_role_required
from workbench.accounts.models import Role
from workbench.agents import selectors, services
from workbench.agents.forms import AgentProgramCreateForm, AgentProgramForm
from workbench.catalog import pages


def agent_program_list(request):
    context = {
        "items": selectors.agent_program_list(user=request.user, team=request.team),
        "can_write": role_at_least(request.team_role, Role.MEMBER),
    }
    return render(request, "agents/list.html", context)


def agent_program_detail(request, pk: int):
    item = selectors.agent_program_get(user=request.user, pk=pk)
    version = selectors.agent_program_version_get(item=item, number=pages.requested_version(request))
    return render(request, "agents/detail.html", pages.detail_context(request, item=item, version=version))


@team_role_required(Role.MEMBER)
def agent_program_create(request):
    form = AgentProgramCreateForm(request.POST or None)
    if request.method == "POST" and form.is_valid():
        try:
            version = services.agent_program_create(team=request.team, user=request.user, **form.cleaned_data)
        except ValidationError as exc:
            form.add_error(None, exc)
        else:
            return redirect(version.item)
    return render(request, "agents/form.html", {"form": form, "item": None})


def agent_program_edit(request, pk: int):
    item = pages.editable(selectors.agent_program_get(user=request.user, pk=pk, min_role=Role.MEMBER))
    latest = item.latest_version()
    form = AgentProgramForm(
        request.POST or None, initial={"source": latest.source, "description": latest.description}
    )
    if request.method == "POST" and form.is_valid():
        try:
            services.agent_program_update(item=item, user=request.user, **form.cleaned_data)
        except ValidationError as exc:
            form.add_error(None, exc)
        else:
            return redirect(item)
    return render(request, "agents/form.html", {"form": form, "item": item})
