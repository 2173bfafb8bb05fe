"""Reads for versioned catalog objects, always scoped to the user's teams."""

from dataclasses import dataclass
from datetime import datetime

from django.apps import apps
from django.db.models import Max, OuterRef, QuerySet, Subquery

from workbench.accounts.access import team_queryset
from workbench.accounts.models import Team
from workbench.catalog.models import CatalogItem, CatalogVersion


def catalog_items_for(*, model: type[CatalogItem], user, team: Team | None = None) -> QuerySet:
    """Live items of user's teams (or of team), annotated with latest_number, newest edit first."""
    qs = team_queryset(model, user).filter(is_deleted=False)
    if team is not None:
        qs = qs.filter(team=team)
    return (
        qs.annotate(latest_number=Max("versions__number"))
        .select_related("created_by")
        .order_by("-updated_at")
    )


def catalog_versions(*, item: CatalogItem) -> QuerySet:
    return item.versions.select_related("created_by").order_by("-number")


def catalog_version_get(*, item: CatalogItem, number: int) -> CatalogVersion:
    return item.versions.get(number=number)


def latest_versions(model: type[CatalogVersion]) -> QuerySet:
    """The newest version of every live item of a catalog version model (unscoped: the caller scopes it,
    e.g. a TeamScopedFormMixin form's choices)."""
    newest = model.objects.filter(item=OuterRef("item")).order_by("-number").values("number")[:1]
    latest = model.objects.filter(item__is_deleted=False, number=Subquery(newest))
    return latest.select_related("item").order_by("item__name")


@dataclass(frozen=True)
class CatalogChange:
    """One saved version: a new item is its version 1, each edit the next number."""

    kind: str  # the item's verbose name, e.g. "dataset"
    item: CatalogItem
    number: int
    note: str
    author: str
    created_at: datetime

    @property
    def diff_url(self) -> str | None:
        return self.item.get_diff_url(self.number - 1, self.number) if self.number > 1 else None


def catalog_version_models() -> list[type[CatalogVersion]]:
    return [model for model in apps.get_models() if issubclass(model, CatalogVersion)]


def recent_changes(*, user, team: Team, limit: int = 8) -> list[CatalogChange]:
    """The newest versions of the team's live catalog items of every kind, newest first: one query per
    kind, reading names and notes only (never a version's content)."""
    changes = []
    for model in catalog_version_models():
        versions = (
            team_queryset(model, user)
            .filter(item__team=team, item__is_deleted=False)
            .select_related("item", "created_by")
            .only("number", "note", "created_at", "item__name", "item__team", "created_by__username")
            .order_by("-created_at", "-id")[:limit]
        )
        changes += [_change(version) for version in versions]
    return sorted(changes, key=lambda change: change.created_at, reverse=True)[:limit]


def _change(version: CatalogVersion) -> CatalogChange:
    item = version.item
    author = version.created_by.username if version.created_by else ""
    return CatalogChange(
        item._meta.verbose_name, item, version.number, version.note, author, version.created_at
    )
