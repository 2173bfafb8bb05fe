"""Reads for datasets, always scoped to the user's teams."""

from __future__ import annotations

from django.db.models import QuerySet
from django.http import Http404

from workbench.accounts.access import get_scoped_or_404
from workbench.accounts.models import Role, Team
from workbench.catalog.selectors import catalog_items_for
from workbench.datasets.models import Dataset, DatasetRow, DatasetUpload, DatasetVersion

PREVIEW_ROWS = 20


def dataset_list(*, user, team: Team | None) -> QuerySet[Dataset]:
    return catalog_items_for(model=Dataset, user=user, team=team)


def dataset_get(*, user, pk, min_role: str = Role.VIEWER) -> Dataset:
    return get_scoped_or_404(Dataset, user, pk, min_role=min_role)


def dataset_version_get(*, dataset: Dataset, number: int | None) -> DatasetVersion:
    """The numbered version, or the latest when number is None; 404 when there is none."""
    versions = dataset.versions.select_related("created_by")
    version = versions.filter(number=number).first() if number else versions.order_by("-number").first()
    if version is None:
        raise Http404
    return version


def dataset_rows(*, version: DatasetVersion, split: str | None = None, limit: int = PREVIEW_ROWS) -> list:
    rows = version.rows.all()
    if split:
        rows = rows.filter(split=split)
    return list(rows[:limit])


def dataset_row_at(*, version: DatasetVersion, index: int) -> DatasetRow | None:
    """Row `index` of a version the caller already scoped (e.g. a team-scoped form choice); None if absent."""
    return version.rows.filter(index=index).first()


def dataset_row_get(*, user, pk) -> DatasetRow:
    return get_scoped_or_404(DatasetRow.objects.select_related("version__item"), user, pk)


def dataset_upload_get(*, user, pk) -> DatasetUpload:
    return get_scoped_or_404(DatasetUpload.objects.select_related("job", "version__item"), user, pk)
