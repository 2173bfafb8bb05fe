"""Reads for reward definitions, always scoped to the user's teams."""

from django.db.models import QuerySet
from django.http import Http404

from workbench.accounts.access import get_scoped_or_404
from workbench.accounts.models import Role, Team
from workbench.catalog.selectors import catalog_items_for
from workbench.rewards.models import RewardDefinition, RewardDefinitionVersion


def reward_definition_list(*, user, team: Team | None) -> QuerySet[RewardDefinition]:
    return catalog_items_for(model=RewardDefinition, user=user, team=team)


def reward_definition_get(*, user, pk, min_role: str = Role.VIEWER) -> RewardDefinition:
    return get_scoped_or_404(RewardDefinition, user, pk, min_role=min_role)


def reward_definition_version_get(*, item: RewardDefinition, number: int | None) -> RewardDefinitionVersion:
    versions = item.versions.select_related("created_by")
    version = versions.filter(number=number).first() if number else versions.order_by("-number").first()
    if version is None:
        raise Http404
    return version
