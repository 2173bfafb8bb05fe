"""Reads for tool schemas, always scoped to the user's teams."""

from django.db.models import QuerySet
from django.http import Http404

from workbench.accounts.access import get_scoped_or_404
from workbench.accounts.models import Role, Team
from workbench.catalog.selectors import catalog_items_for
from workbench.toolschemas.models import ToolSchema, ToolSchemaVersion


def tool_schema_list(*, user, team: Team | None) -> QuerySet[ToolSchema]:
    return catalog_items_for(model=ToolSchema, user=user, team=team)


def tool_schema_get(*, user, pk, min_role: str = Role.VIEWER) -> ToolSchema:
    return get_scoped_or_404(ToolSchema, user, pk, min_role=min_role)


def tool_schema_version_get(*, item: ToolSchema, number: int | None) -> ToolSchemaVersion:
    versions = item.versions.select_related("created_by")
    version = versions.filter(number=number).first() if number else versions.order_by("-number").first()
    if version is None:
        raise Http404
    return version
