"""The upload path end to end against a real Celery worker process (Redis broker, PostgreSQL)."""

import json

import pytest
from django.core.files.uploadedfile import SimpleUploadedFile

from tests.support.polling import wait_for
from workbench.datasets.models import DatasetRow, DatasetUpload
from workbench.jobs.models import JobProgress

pytestmark = [pytest.mark.services, pytest.mark.timeout(180)]


@pytest.fixture
def media_root(settings, transactional_db):
    """The worker is another process: both must use the default media directory, not a test one."""
    yield settings.MEDIA_ROOT
    for upload in DatasetUpload.objects.all():
        upload.file.delete(save=False)


def uploaded(upload: DatasetUpload, status: str) -> DatasetUpload | None:
    return DatasetUpload.objects.filter(pk=upload.pk, status=status).first()


def _post(client, name: str, lines: list[str]):
    file = SimpleUploadedFile("data.jsonl", "".join(line + "\n" for line in lines).encode())
    form = {"name": name, "split_method": "ratio", "eval_ratio": "0.25", "split_seed": "0", "file": file}
    response = client.post("/datasets/new/", form)
    assert response.status_code == 302
    return DatasetUpload.objects.get(name=name)


def test_worker_validates_stores_and_reports_progress(transactional_db, celery_worker, client_for, member):
    client = client_for(member)
    rows = [json.dumps({"question": f"{i} * 2?", "answer": str(2 * i)}) for i in range(3000)]
    upload = _post(client, "doubles", rows)
    done = wait_for(lambda: uploaded(upload, "done"), 60, "the upload", celery_worker)
    assert (done.version.row_count, done.version.eval_count) == (3000, 750)
    assert DatasetRow.objects.filter(version=done.version).count() == 3000
    job = JobProgress.objects.get(pk=upload.job_id)
    assert (job.status, job.progress, job.message) == ("succeeded", 1.0, "Stored 3000 rows as version 1")
    body = client.get(f"/datasets/uploads/{upload.pk}/status/").content.decode()
    assert 'id="dataset-link">doubles v1<' in body and "hx-trigger" not in body


def test_worker_rejects_a_bad_file_and_stores_nothing(transactional_db, celery_worker, client_for, member):
    upload = _post(client_for(member), "broken", ['{"question": "ok", "answer": 1}', '{"question": "x",'])
    failed = wait_for(lambda: uploaded(upload, "failed"), 60, "the upload to fail", celery_worker)
    assert failed.errors[0].startswith("line 2: invalid JSON:")
    assert JobProgress.objects.get(pk=upload.job_id).status == "failed"
    assert DatasetRow.objects.count() == 0
