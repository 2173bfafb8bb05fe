"""A small read-only JSON API over agent programs, scoped like the pages."""

from workbench.agents import selectors
from workbench.agents.models import AgentProgramVersion
from workbench.catalog import api as catalog_api


def _version_fields(version: AgentProgramVersion) -> dict:
    return {"source": version.source, "description": version.description}


def agent_program_list(request):
    items = selectors.agent_program_list(user=request.user, team=None)
    return catalog_api.list_response(key="agent_programs", items=items)


def agent_program_detail(request, pk: int):
    item = selectors.agent_program_get(user=request.user, pk=pk)
    version = selectors.agent_program_version_get(item=item, number=None)
    return catalog_api.detail_response(item=item, version=version, version_fields=_version_fields)
