"""Celery tasks of the datasets app: thin, by id, acknowledged only when done; the work is in services."""

from celery import shared_task

from workbench.datasets.services import UPLOAD_TASK, dataset_upload_run


@shared_task(acks_late=True, name=UPLOAD_TASK)
def dataset_upload_process_task(*, job_id: str, upload_id: int) -> str:
    """Validate an upload, compute its statistics and store its rows (progress in JobProgress job_id).

    A worker killed mid-task leaves the upload running and the message unacknowledged, so another
    worker redoes it from the start (the store transaction was rolled back)."""
    del job_id  # the upload knows its job; the id is passed so every task has the same signature
    return dataset_upload_run(upload_id=upload_id).status
