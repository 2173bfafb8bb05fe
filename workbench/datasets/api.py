"""A small read-only JSON API over datasets, scoped like the pages (another team's dataset is a 404)."""

from django.http import JsonResponse

from workbench.catalog import api as catalog_api
from workbench.datasets import selectors
from workbench.datasets.models import DatasetRow, DatasetVersion


def _version_json(version: DatasetVersion) -> dict:
    return {
        "number": version.number,
        "description": version.description,
        "file": {"name": version.source_name, "format": version.file_format, "bytes": version.file_size},
        "split": {"method": version.split_method, "label": version.split_label()},
        "rows": {"total": version.row_count, "train": version.train_count, "eval": version.eval_count},
        "created_at": version.created_at.isoformat(),
    }


def _row_json(row: DatasetRow) -> dict:
    return {
        "index": row.index,
        "split": row.split,
        "prompt": row.prompt,
        "answer": row.answer,
        "tool_calls": row.tool_calls,
        "initial_state": row.initial_state,
        "metadata": row.metadata,
    }


def dataset_list(request):
    datasets = selectors.dataset_list(user=request.user, team=None)
    return catalog_api.list_response(key="datasets", items=datasets)


def dataset_detail(request, pk: int):
    dataset = selectors.dataset_get(user=request.user, pk=pk)
    version = selectors.dataset_version_get(dataset=dataset, number=None)
    body = {
        **catalog_api.item_json(dataset),
        "version": _version_json(version),
        "statistics": version.statistics,
        "preview": [_row_json(row) for row in selectors.dataset_rows(version=version)],
    }
    return JsonResponse(body)
