"""Reads for versioned catalog objects, always scoped to the user's teams."""

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
