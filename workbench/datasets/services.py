"""Writes for datasets: a Celery task turns an upload into a new version, of a new or existing dataset."""

from __future__ import annotations

from pathlib import Path

from celery import signature
from django.core.exceptions import PermissionDenied, ValidationError
from django.core.files.uploadedfile import UploadedFile
from django.db import transaction

from workbench.accounts.access import require_role
from workbench.accounts.models import Role, Team
from workbench.catalog.services import catalog_item_create, catalog_version_create
from workbench.datasets.ingest import Report, SplitConfig, stored_rows, validate_file
from workbench.datasets.limits import UploadLimits
from workbench.datasets.models import (
    Dataset,
    DatasetKind,
    DatasetRow,
    DatasetUpload,
    DatasetVersion,
    SplitMethod,
    UploadStatus,
)
from workbench.datasets.parsing import check_head, check_size, format_for_filename
from workbench.datasets.records import FileError
from workbench.jobs.services import job_create, job_enqueue, job_fail, job_succeed, job_update

ROW_BATCH = 1000

# The upload task's registered name: this module sends it by name, so it never imports the tasks module
# (the tasks call these services, never the other way round).
UPLOAD_TASK = "workbench.datasets.tasks.dataset_upload_process_task"


def _split_errors(*, split_method: str, eval_ratio: float, split_column: str) -> dict[str, str]:
    if split_method == SplitMethod.COLUMN and not split_column.strip():
        return {"split_column": "Name the column that holds train/eval."}
    if split_method == SplitMethod.RATIO and not 0.0 <= eval_ratio < 1.0:
        return {"eval_ratio": "Use a fraction from 0 up to (not including) 1."}
    return {}


def dataset_name_taken(*, team: Team, name: str) -> bool:
    return Dataset.objects.filter(team=team, name=name.strip(), is_deleted=False).exists()


def dataset_upload_create(
    *,
    team: Team,
    user,
    name: str,
    file: UploadedFile | None,
    dataset: Dataset | None = None,
    description: str = "",
    note: str = "",
    split_method: str = SplitMethod.RATIO,
    eval_ratio: float = 0.1,
    split_seed: int = 0,
    split_column: str = "",
    kind: str = DatasetKind.PROMPTS,
    process_now: bool = False,
) -> DatasetUpload:
    """Store the file and queue its validation; `dataset` set means a new version of it (of its kind:
    `kind`, prompts or conversations, is for a new dataset).

    Without a file, a new version re-reads the latest version's file (e.g. to change the split).
    `process_now` validates and stores in this process instead (demo seeding, scripts)."""
    require_role(user=user, team=team, min_role=Role.MEMBER)
    errors = _split_errors(split_method=split_method, eval_ratio=eval_ratio, split_column=split_column)
    if dataset is None and dataset_name_taken(team=team, name=name):
        errors["name"] = "This team already has a dataset with that name."
    if kind not in DatasetKind.values:
        errors["kind"] = f"Choose one of {', '.join(DatasetKind.values)}."
    previous = dataset.latest_version() if dataset is not None else None
    if file is None and previous is None:
        errors["file"] = "Choose a JSONL, CSV or Parquet file."
    if file is not None:
        try:
            file_format = _check_file(file)
        except FileError as exc:
            errors["file"] = str(exc)
    if errors:
        raise ValidationError(errors)
    upload = DatasetUpload(
        team=team,
        created_by=user,
        dataset=dataset,
        name=dataset.name if dataset is not None else name.strip(),
        kind=dataset.kind if dataset is not None else kind,
        description=description,
        note=note,
        split_method=split_method,
        eval_ratio=eval_ratio,
        split_seed=split_seed,
        split_column=split_column.strip(),
    )
    if file is not None:
        upload.file, upload.source_name, upload.file_format = file, Path(file.name).name, file_format
    else:
        upload.file, upload.source_name = previous.file.name, previous.source_name
        upload.file_format = previous.file_format
    try:
        with transaction.atomic():
            upload.job = job_create(team=team, kind="dataset_validate")
            upload.save()
            if not process_now:
                job_enqueue(job=upload.job, task=signature(UPLOAD_TASK), upload_id=upload.pk)
    except BaseException:
        if file is not None and upload.file.name:  # saved before the transaction rolled back
            upload.file.storage.delete(upload.file.name)
        raise
    return dataset_upload_run(upload_id=upload.pk) if process_now else upload


def _check_file(file: UploadedFile) -> str:
    """The file's format, after the checks that need only its size and its start or footer (header
    columns, first row, Parquet's promised size): refused here, such a file is never stored."""
    file_format = format_for_filename(file.name)
    limits = UploadLimits.from_settings()
    check_size(file.size, limits.max_upload_bytes)
    file.seek(0)
    try:
        check_head(file, file_format, limits)
    finally:
        file.seek(0)
    return file_format


def dataset_upload_process(*, upload_id: int) -> DatasetUpload:
    """Validate the upload's file and, only if every row is valid, store all rows as a new version."""
    upload = DatasetUpload.objects.select_related("team", "created_by", "dataset", "job").get(pk=upload_id)
    if upload.status in (UploadStatus.DONE, UploadStatus.FAILED):
        return upload  # a redelivered task (acks_late) finds the work done
    job_id = upload.job_id
    DatasetUpload.objects.filter(pk=upload.pk).update(status=UploadStatus.RUNNING)
    split = SplitConfig(upload.split_method, upload.eval_ratio, upload.split_seed, upload.split_column)
    path = Path(upload.file.path)

    def progress(fraction: float, message: str) -> None:
        # Pass 1 is the first 80%: storing valid rows is the rest.
        if job_id:
            job_update(job_id=job_id, progress=0.8 * fraction, message=message)

    limits = UploadLimits.from_settings()
    report = validate_file(path, upload.file_format, split, limits, progress, kind=upload.kind)
    if not report.error_count:
        if job_id:
            job_update(job_id=job_id, progress=0.8, message=f"Storing {report.rows} rows")
        try:
            upload.version = _store(upload=upload, report=report, split=split, path=path, limits=limits)
        except (ValidationError, PermissionDenied, FileError) as exc:
            report.add_error(_message(exc))
    if report.error_count:
        return _upload_fail(upload=upload, report=report)
    upload.status = UploadStatus.DONE
    message = f"Stored {report.rows} row{'' if report.rows == 1 else 's'} as version {upload.version.number}"
    with transaction.atomic():  # whoever sees the upload done sees its job done
        upload.save(update_fields=["status", "version"])
        if job_id:
            job_succeed(job_id=job_id, message=message)
    return upload


def dataset_upload_run(*, upload_id: int) -> DatasetUpload:
    """What the upload task does: process the upload; an unexpected error (a bug, a lost database or
    file) marks it failed so the page stops waiting, then propagates to the worker."""
    try:
        return dataset_upload_process(upload_id=upload_id)
    except Exception as exc:
        dataset_upload_abort(upload_id=upload_id, error=f"{type(exc).__name__}: {exc}")
        raise


def dataset_upload_abort(*, upload_id: int, error: str) -> None:
    """Record an unexpected failure (a bug, a lost database) so the page stops waiting; nothing was stored,
    so the file goes too."""
    upload = DatasetUpload.objects.exclude(status=UploadStatus.DONE).filter(pk=upload_id).first()
    if upload is None:
        return
    _discard_file(upload)
    with transaction.atomic():
        upload.status, upload.errors = UploadStatus.FAILED, [f"internal error: {error}"]
        upload.save(update_fields=["status", "errors"])
        if upload.job_id:
            job_fail(job_id=upload.job_id, error=error, message="Internal error; nothing was saved")


def _message(exc: Exception) -> str:
    if isinstance(exc, ValidationError):
        return "; ".join(exc.messages)
    return str(exc) or "You no longer have the member role in this team."


def _upload_fail(*, upload: DatasetUpload, report: Report) -> DatasetUpload:
    _discard_file(upload)  # before the status: whoever sees the upload failed finds its file gone
    upload.status, upload.errors = UploadStatus.FAILED, report.messages()
    summary = f"{report.error_count} problem{'s' if report.error_count != 1 else ''}; nothing was saved"
    with transaction.atomic():  # and its job failed
        upload.save(update_fields=["status", "errors"])
        if upload.job_id:
            job_fail(job_id=upload.job_id, error="\n".join(upload.errors), message=summary)
    return upload


def _discard_file(upload: DatasetUpload) -> None:
    """A failed upload's file is of no further use, unless it is an earlier version's file being re-split."""
    if upload.file.name and not DatasetVersion.objects.filter(file=upload.file.name).exists():
        upload.file.storage.delete(upload.file.name)


@transaction.atomic
def _store(
    *, upload: DatasetUpload, report: Report, split: SplitConfig, path: Path, limits: UploadLimits
) -> DatasetVersion:
    """One transaction: the version (and dataset) and every row, or nothing."""
    version = DatasetVersion(
        description=upload.description,
        note=upload.note,
        file=upload.file.name,
        source_name=upload.source_name,
        file_format=upload.file_format,
        file_size=path.stat().st_size,
        split_method=split.method,
        eval_ratio=split.eval_ratio,
        split_seed=split.seed,
        split_column=split.column,
        row_count=report.rows,
        train_count=report.rows - report.eval_rows,
        eval_count=report.eval_rows,
        statistics=report.statistics,
    )
    if upload.dataset is None:
        item = Dataset(team=upload.team, name=upload.name, kind=upload.kind)
        version = catalog_item_create(item=item, version=version, user=upload.created_by)
    else:
        version = catalog_version_create(item=upload.dataset, version=version, user=upload.created_by)
    batch = []
    rows = stored_rows(path, upload.file_format, split, report.rows, limits, kind=upload.kind)
    for index, split_name, row in rows:
        batch.append(
            DatasetRow(
                version=version,
                index=index,
                split=split_name,
                prompt=row.prompt,
                answer=row.answer,
                tool_calls=row.tool_calls,
                initial_state=row.initial_state,
                metadata=row.metadata,
                messages=row.messages,
            )
        )
        if len(batch) >= ROW_BATCH:
            DatasetRow.objects.bulk_create(batch)
            batch = []
    DatasetRow.objects.bulk_create(batch)
    return version
