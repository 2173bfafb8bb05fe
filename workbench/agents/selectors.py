"""Reads for agent programs, always scoped to the user's teams."""

from django.db.models import QuerySet
from django.http import Http404

from workbench.accounts.access import get_scoped_or_404
from workbench.accounts.models import Role, Team
from workbench.agents.models import AgentProgram, AgentProgramVersion
from workbench.catalog.selectors import catalog_items_for


def agent_program_list(*, user, team: Team | None) -> QuerySet[AgentProgram]:
    return catalog_items_for(model=AgentProgram, user=user, team=team)


def agent_program_get(*, user, pk, min_role: str = Role.VIEWER) -> AgentProgram:
    return get_scoped_or_404(AgentProgram, user, pk, min_role=min_role)


def agent_program_version_get(*, item: AgentProgram, number: int | None) -> AgentProgramVersion:
    versions = item.versions.select_related("created_by")
    version = versions.filter(number=number).first() if number else versions.order_by("-number").first()
    if version is None:
        raise Http404
    return version
