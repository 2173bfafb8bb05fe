import json

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from django.core.exceptions import PermissionDenied, ValidationError
from django.http import Http404

from workbench.catalog.services import catalog_item_soft_delete, version_diff
from workbench.datasets import selectors, services
from workbench.datasets.models import Dataset, DatasetRow, DatasetUpload, DatasetVersion, UploadStatus
from workbench.datasets.tasks import dataset_upload_process_task
from workbench.jobs.models import JobProgress, JobStatus


def _jsonl(rows) -> str:
    return "".join(json.dumps(r) + "\n" for r in rows)


def _rows(n):
    return [{"question": f"What is {i} + 1?", "answer": str(i + 1)} for i in range(n)]


def _upload(team, user, upload_file, name="arith", content=None, filename="d.jsonl", **kwargs):
    file = upload_file(filename, content if content is not None else _jsonl(_rows(10)))
    upload = services.dataset_upload_create(team=team, user=user, name=name, file=file, **kwargs)
    return services.dataset_upload_process(upload_id=upload.pk)


def _counts():
    return Dataset.objects.count(), DatasetVersion.objects.count(), DatasetRow.objects.count()


def test_valid_jsonl_becomes_version_one_with_rows_stats_and_split(team, member, upload_file):
    upload = _upload(team, member, upload_file, eval_ratio=0.2, split_seed=3)
    assert upload.status == UploadStatus.DONE
    version = upload.version
    assert (version.number, version.row_count, version.train_count, version.eval_count) == (1, 10, 8, 2)
    assert version.rows.filter(split="eval").count() == 2
    assert version.statistics["fields"]["prompt"]["present"] == 10
    first = version.rows.first()
    assert (first.prompt, first.answer, first.ground_truth()) == ("What is 0 + 1?", "1", {"answer": "1"})
    job = JobProgress.objects.get(pk=upload.job_id)
    assert (job.status, job.progress, job.message) == (
        JobStatus.SUCCEEDED,
        1.0,
        "Stored 10 rows as version 1",
    )


def test_malformed_jsonl_reports_line_and_saves_nothing(team, member, upload_file):
    before = _counts()
    content = _jsonl(_rows(3)) + '{"question": "x" "answer": 1}\n' + _jsonl(_rows(2))
    upload = _upload(team, member, upload_file, content=content)
    assert upload.status == UploadStatus.FAILED
    assert upload.errors == ["line 4: invalid JSON: Expecting ',' delimiter at column 18"]
    assert _counts() == before
    job = JobProgress.objects.get(pk=upload.job_id)
    assert (job.status, job.message) == (JobStatus.FAILED, "1 problem; nothing was saved")


def test_a_failed_upload_leaves_no_file_behind(team, member, upload_file, media_root):
    upload = _upload(team, member, upload_file, content='{"question": "q"}\n')
    assert upload.status == UploadStatus.FAILED
    assert not upload.file.storage.exists(upload.file.name)
    assert [p for p in media_root.rglob("*") if p.is_file()] == []


def test_bad_row_after_thousands_of_good_rows_saves_nothing(team, member, upload_file):
    before = _counts()
    content = _jsonl(_rows(2500) + [{"question": "no answer"}])
    upload = _upload(team, member, upload_file, content=content)
    assert upload.errors == ["line 2501, field answer: required when tool_calls is absent"]
    assert _counts() == before


def test_many_errors_are_capped_with_a_count(team, member, upload_file):
    upload = _upload(team, member, upload_file, content=_jsonl([{"question": "q"}] * 60))
    assert len(upload.errors) == 51
    assert upload.errors[-1] == "... and 10 more problems"


def test_wrong_encoding_is_a_clear_error(team, member, upload_file):
    content = 'question,answer\n"caf\xe9?",1\n'.encode("latin-1")
    with pytest.raises(ValidationError) as exc:  # seen in the first row, so refused before it is stored
        _upload(team, member, upload_file, content=content, filename="d.csv")
    assert exc.value.message_dict["file"][0].startswith("the file is not UTF-8 text (line 2: byte 0xe9")


def test_empty_and_blank_files_are_refused(team, member, upload_file):
    with pytest.raises(ValidationError) as exc:
        _upload(team, member, upload_file, content=b"")
    assert exc.value.message_dict == {"file": ["the file is empty"]}
    assert _upload(team, member, upload_file, content="\n\n").errors == ["the file has no rows"]
    assert DatasetRow.objects.count() == 0


def test_over_size_file_is_refused_before_anything_is_stored(team, member, upload_file, settings):
    settings.DATASET_MAX_UPLOAD_BYTES = 100
    with pytest.raises(ValidationError) as exc:
        _upload(team, member, upload_file, content=_jsonl(_rows(10)))
    assert exc.value.message_dict["file"] == ["the file is 461 bytes; the upload limit is 100 bytes"]
    assert DatasetUpload.objects.count() == 0


def test_csv_with_split_column_and_tool_calls(team, member, upload_file):
    calls = json.dumps([{"name": "calculator", "arguments": {"expression": "2*3"}}]).replace('"', '""')
    content = f'prompt,tool_calls,split\nCompute 2*3,"{calls}",train\nAgain,"{calls}",test\n'
    upload = _upload(team, member, upload_file, content=content, filename="d.csv", split_method="column",
                     split_column="split")  # fmt: skip
    version = upload.version
    assert (version.train_count, version.eval_count) == (1, 1)
    row = version.rows.get(index=1)
    assert row.split == "eval"
    assert row.tool_calls == [{"name": "calculator", "arguments": {"expression": "2*3"}}]
    assert row.metadata == {"split": "test"}


def test_bad_split_value_is_a_row_error(team, member, upload_file):
    content = "question,answer,part\nq,1,holdout\n"
    upload = _upload(team, member, upload_file, content=content, filename="d.csv", split_method="column",
                     split_column="part")  # fmt: skip
    assert upload.errors[0].startswith("row 1, field part: split value 'holdout' is not one of")


def test_parquet_upload(team, member, upload_file, tmp_path):
    path = tmp_path / "d.parquet"
    pq.write_table(
        pa.table({"question": ["a?", "b?"], "answer": [1, 2], "initial_state": ['{"x": 1}', None]}), path
    )
    upload = _upload(team, member, upload_file, content=path.read_bytes(), filename="d.parquet")
    rows = list(upload.version.rows.all())
    assert [(r.answer, r.initial_state) for r in rows] == [("1", {"x": 1}), ("2", None)]


def test_duplicate_name_is_a_form_error(team, member, upload_file):
    _upload(team, member, upload_file)
    with pytest.raises(ValidationError) as exc:
        _upload(team, member, upload_file)
    assert exc.value.message_dict == {"name": ["This team already has a dataset with that name."]}


def test_edit_creates_version_two_and_leaves_version_one(team, member, upload_file):
    first = _upload(team, member, upload_file).version
    dataset = first.item
    new = upload_file("e.jsonl", _jsonl(_rows(12)))
    upload = services.dataset_upload_create(
        team=team, user=member, name="ignored", dataset=dataset, file=new, description="more rows", note="v2"
    )
    second = services.dataset_upload_process(upload_id=upload.pk).version
    first.refresh_from_db()
    assert (first.number, first.row_count, first.rows.count()) == (1, 10, 10)
    assert (second.number, second.row_count, second.rows.count(), second.item_id) == (2, 12, 12, dataset.pk)
    diff = {
        line.text for line in version_diff(old_text=first.canonical_text(), new_text=second.canonical_text())
    }
    assert '+  "description": "more rows",' in diff
    assert '+    "total": 12,' in diff


def test_edit_without_file_resplits_the_latest_file(team, member, upload_file):
    dataset = _upload(team, member, upload_file, eval_ratio=0.0).version.item
    upload = services.dataset_upload_create(
        team=team, user=member, name="", dataset=dataset, file=None, eval_ratio=0.5
    )
    second = services.dataset_upload_process(upload_id=upload.pk).version
    assert (second.number, second.row_count, second.eval_count) == (2, 10, 5)


def test_viewer_cannot_upload(team, viewer, upload_file):
    with pytest.raises(PermissionDenied):
        _upload(team, viewer, upload_file)


def test_other_teams_dataset_is_not_found(team, member, outsider, upload_file):
    dataset = _upload(team, member, upload_file).version.item
    with pytest.raises(Http404):
        selectors.dataset_get(user=outsider, pk=dataset.pk)
    assert list(selectors.dataset_list(user=outsider, team=None)) == []


def test_delete_hides_the_dataset_and_frees_its_name(team, member, upload_file):
    dataset = _upload(team, member, upload_file).version.item
    catalog_item_soft_delete(item=dataset, user=member)
    assert list(selectors.dataset_list(user=member, team=team)) == []
    again = _upload(team, member, upload_file)
    assert again.version.item_id != dataset.pk and dataset.versions.get().rows.count() == 10


def test_an_unexpected_error_marks_the_upload_failed(team, member, upload_file):
    file = upload_file("d.jsonl", _jsonl(_rows(2)))
    upload = services.dataset_upload_create(team=team, user=member, name="d", file=file)
    upload.file.storage.delete(upload.file.name)  # the file vanished from shared storage
    with pytest.raises(FileNotFoundError):
        dataset_upload_process_task.run(job_id=str(upload.job_id), upload_id=upload.pk)
    upload.refresh_from_db()
    assert upload.status == UploadStatus.FAILED and upload.errors[0].startswith(
        "internal error: FileNotFoundError"
    )
    assert JobProgress.objects.get(pk=upload.job_id).message == "Internal error; nothing was saved"


def test_an_upload_sends_the_registered_task_once_committed(
    team, member, upload_file, monkeypatch, django_capture_on_commit_callbacks
):
    from workbench.celery_app import app

    sent = []

    def send_task(name, args=None, kwargs=None, **options):
        sent.append((name, kwargs))

    monkeypatch.setattr(app, "send_task", send_task)
    with django_capture_on_commit_callbacks(execute=True):
        file = upload_file("d.jsonl", _jsonl(_rows(2)))
        upload = services.dataset_upload_create(team=team, user=member, name="d", file=file)
        assert sent == []  # nothing is sent before the upload's rows are committed
    expected = {"job_id": str(upload.job_id), "upload_id": upload.pk}
    assert sent == [(dataset_upload_process_task.name, expected)]


def test_the_services_do_not_import_the_tasks_module():
    """The task calls the services; the services send the task by its name, so there is no import cycle."""
    import ast
    import inspect

    tree = ast.parse(inspect.getsource(services))
    imported = {node.module for node in ast.walk(tree) if isinstance(node, ast.ImportFrom)}
    imports = [node for node in ast.walk(tree) if isinstance(node, ast.Import)]
    imported |= {alias.name for node in imports for alias in node.names}
    assert not {name for name in imported if name and name.endswith("tasks")}


def test_redelivered_task_does_not_store_twice(team, member, upload_file):
    upload = _upload(team, member, upload_file)
    again = services.dataset_upload_process(upload_id=upload.pk)
    assert again.version_id == upload.version_id
    assert DatasetRow.objects.count() == 10
