"""Dataset pages: list, detail with preview and statistics, upload (create / new version), upload progress."""

from django.core.exceptions import ValidationError
from django.shortcuts import redirect, render

from workbench.accounts.access import role_at_least, team_role_required
from workbench.accounts.models import Role
from workbench.catalog import pages
from workbench.datasets import selectors, services
from workbench.datasets.forms import DatasetCreateForm, DatasetUploadForm
from workbench.datasets.models import DatasetKind
from workbench.datasets.splits import EVAL, TRAIN
from workbench.datasets.upload_handler import limited_upload, upload_refusal


def dataset_list(request):
    datasets = selectors.dataset_list(user=request.user, team=request.team)
    can_write = role_at_least(request.team_role, Role.MEMBER)
    return render(request, "datasets/list.html", {"datasets": datasets, "can_write": can_write})


def dataset_detail(request, pk: int):
    dataset = selectors.dataset_get(user=request.user, pk=pk)
    version = selectors.dataset_version_get(dataset=dataset, number=pages.requested_version(request))
    context = {
        **pages.detail_context(request, item=dataset, version=version, item_key="dataset"),
        "rows": _previews(version),
    }
    return render(request, "datasets/detail.html", context)


def _previews(version, split: str | None = None) -> list:
    """Rows of prompts as table rows; conversations turn by turn."""
    if version.item.kind == DatasetKind.CONVERSATIONS:
        return selectors.conversation_previews(version=version, split=split)
    return selectors.dataset_row_previews(version=version, split=split)


def dataset_rows(request, pk: int, number: int):
    """htmx partial: the first rows of a version, all or one split."""
    dataset = selectors.dataset_get(user=request.user, pk=pk)
    version = selectors.dataset_version_get(dataset=dataset, number=number)
    split = request.GET.get("split") if request.GET.get("split") in (TRAIN, EVAL) else None
    rows = _previews(version, split)
    return render(request, "datasets/_rows.html", {"rows": rows, "version": version, "split": split})


@limited_upload
@team_role_required(Role.MEMBER)
def dataset_create(request):
    form = _bound(DatasetCreateForm, request)
    if request.method == "POST" and form.is_valid():
        upload = _upload(form, team=request.team, user=request.user, name=form.cleaned_data["name"])
        if upload is not None:
            return redirect(upload)
    return render(request, "datasets/form.html", {"form": form, "dataset": None})


@limited_upload
def dataset_edit(request, pk: int):
    dataset = pages.editable(selectors.dataset_get(user=request.user, pk=pk, min_role=Role.MEMBER))
    latest = dataset.latest_version()
    initial = {
        "description": latest.description,
        "split_method": latest.split_method,
        "eval_ratio": latest.eval_ratio,
        "split_seed": latest.split_seed,
        "split_column": latest.split_column,
    }
    form = _bound(DatasetUploadForm, request, initial=initial)
    if request.method == "POST" and form.is_valid():
        upload = _upload(form, team=dataset.team, user=request.user, name=dataset.name, dataset=dataset)
        if upload is not None:
            return redirect(upload)
    return render(request, "datasets/form.html", {"form": form, "dataset": dataset, "latest": latest})


def _bound(form_class, request, **kwargs):
    """The upload form, bound on POST; the body is parsed first, so the upload limit can say why it stops."""
    if request.method != "POST":
        return form_class(**kwargs)
    data, files = request.POST, request.FILES
    return form_class(data, files, upload_error=upload_refusal(request), **kwargs)


def _upload(form, *, team, user, name, dataset=None):
    data = form.cleaned_data
    try:
        return services.dataset_upload_create(
            team=team,
            user=user,
            name=name,
            dataset=dataset,
            file=data.get("file"),
            description=data["description"],
            note=data["note"],
            split_method=data["split_method"],
            eval_ratio=data["eval_ratio"],
            split_seed=data["split_seed"],
            split_column=data["split_column"],
            kind=data.get("kind") or DatasetKind.PROMPTS,
        )
    except ValidationError as exc:
        form.add_error(None, exc)
        return None


def upload_detail(request, pk: int):
    upload = selectors.dataset_upload_get(user=request.user, pk=pk)
    return render(request, "datasets/upload.html", {"upload": upload})


def upload_status(request, pk: int):
    """htmx partial polled while the upload's task runs."""
    upload = selectors.dataset_upload_get(user=request.user, pk=pk)
    return render(request, "datasets/_upload_status.html", {"upload": upload})
