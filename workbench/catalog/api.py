"""JSON shapes the catalog apps' read-only APIs share: item summary, list, latest-version detail."""

from collections.abc import Callable

from django.db.models import QuerySet
from django.http import JsonResponse

from workbench.catalog.models import CatalogItem, CatalogVersion


def item_json(item: CatalogItem) -> dict:
    return {"id": item.pk, "name": item.name, "team": item.team.name}


def list_response(*, key: str, items: QuerySet) -> JsonResponse:
    body = [{**item_json(i), "latest_version": i.latest_number} for i in items.select_related("team")]
    return JsonResponse({key: body})


def detail_response(
    *, item: CatalogItem, version: CatalogVersion, version_fields: Callable[[CatalogVersion], dict]
) -> JsonResponse:
    """The item with its version number, then what `version_fields` says about that kind's version."""
    return JsonResponse({**item_json(item), "version": version.number, **version_fields(version)})
