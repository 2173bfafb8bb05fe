"""Steps every catalog app's own detail and edit pages share: which version to show, who may write."""

from django.http import Http404

from workbench.accounts.access import role_at_least
from workbench.accounts.models import Role
from workbench.accounts.selectors import role_for
from workbench.catalog.models import CatalogItem, CatalogVersion


def requested_version(request) -> int | None:
    """The `?version=` number asked for; None (the latest) when absent or not a number."""
    try:
        return int(request.GET.get("version"))
    except (TypeError, ValueError):
        return None


def detail_context(request, *, item: CatalogItem, version: CatalogVersion, item_key: str = "item") -> dict:
    """The item, the shown version, every version number (newest first) and whether the user may edit."""
    return {
        item_key: item,
        "version": version,
        "versions": item.versions.order_by("-number").values_list("number", flat=True),
        "can_write": role_at_least(role_for(user=request.user, team=item.team), Role.MEMBER),
    }


def editable(item: CatalogItem) -> CatalogItem:
    """The item itself; a 404 once deleted, because a deleted item gets no new versions."""
    if item.is_deleted:
        raise Http404
    return item
