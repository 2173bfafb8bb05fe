"""Writes for versioned catalog objects, and the diff between two versions."""

import difflib
from dataclasses import dataclass

from django.db import transaction
from django.db.models import Max

from workbench.accounts.access import require_role
from workbench.accounts.models import Role
from workbench.catalog.models import CatalogItem, CatalogVersion


@dataclass(frozen=True)
class DiffLine:
    kind: str  # "hunk", "add", "del" or "same"
    text: str


def version_next_number(*, item: CatalogItem) -> int:
    """1 + the highest version number of item; call inside a transaction holding the item's row lock."""
    return (item.versions.aggregate(top=Max("number"))["top"] or 0) + 1


@transaction.atomic
def catalog_item_create(*, item: CatalogItem, version: CatalogVersion, user) -> CatalogVersion:
    """Save a new item (in item.team, which user must be a member of) with its first version."""
    require_role(user=user, team=item.team_id, min_role=Role.MEMBER)
    item.created_by = user
    item.full_clean()
    item.save()
    return _version_save(item=item, version=version, user=user, number=1)


@transaction.atomic
def catalog_version_create(*, item: CatalogItem, version: CatalogVersion, user) -> CatalogVersion:
    """An edit: a new version numbered after the latest; earlier versions never change."""
    require_role(user=user, team=item.team_id, min_role=Role.MEMBER)
    # The row lock serialises concurrent edits so two never take the same number.
    locked = type(item).objects.select_for_update().get(pk=item.pk)
    locked.save(update_fields=["updated_at"])
    return _version_save(item=locked, version=version, user=user, number=version_next_number(item=locked))


def catalog_item_soft_delete(*, item: CatalogItem, user) -> None:
    """Hide the item from lists; its versions stay for the runs that pin them, and its name is free again."""
    require_role(user=user, team=item.team_id, min_role=Role.MEMBER)
    item.is_deleted = True
    item.save(update_fields=["is_deleted", "updated_at"])


def version_diff(*, old_text: str, new_text: str, context: int = 3) -> list[DiffLine]:
    """Line diff (unified format, file headers dropped) of two canonical texts."""
    lines = difflib.unified_diff(old_text.splitlines(), new_text.splitlines(), lineterm="", n=context)
    kinds = {"@": "hunk", "+": "add", "-": "del", " ": "same"}
    return [DiffLine(kind=kinds[line[0]], text=line) for line in lines if not line.startswith(("---", "+++"))]


def _version_save(*, item: CatalogItem, version: CatalogVersion, user, number: int) -> CatalogVersion:
    version.item = item
    version.number = number
    version.created_by = user
    version.full_clean()
    version.save()
    return version
