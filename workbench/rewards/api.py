"""A small read-only JSON API over reward definitions, scoped like the pages."""

from workbench.catalog import api as catalog_api
from workbench.rewards import selectors
from workbench.rewards.models import RewardDefinitionVersion


def _version_fields(version: RewardDefinitionVersion) -> dict:
    return {"description": version.description, "definition": version.definition}


def reward_definition_list(request):
    items = selectors.reward_definition_list(user=request.user, team=None)
    return catalog_api.list_response(key="reward_definitions", items=items)


def reward_definition_detail(request, pk: int):
    item = selectors.reward_definition_get(user=request.user, pk=pk)
    version = selectors.reward_definition_version_get(item=item, number=None)
    return catalog_api.detail_response(item=item, version=version, version_fields=_version_fields)
