import json

import pytest

from workbench.datasets import services
from workbench.datasets.models import DatasetUpload, UploadStatus

XSS = "<script>alert(1)</script><b>bold</b>"
ESCAPED = "&lt;script&gt;alert(1)&lt;/script&gt;&lt;b&gt;bold&lt;/b&gt;"


def _jsonl(rows) -> str:
    return "".join(json.dumps(r) + "\n" for r in rows)


@pytest.fixture
def dataset(team, member, upload_file):
    rows = [{"question": f"{i} + 1?", "answer": str(i + 1)} for i in range(5)]
    file = upload_file("arith.jsonl", _jsonl(rows))
    upload = services.dataset_upload_create(team=team, user=member, name="arith", file=file)
    return services.dataset_upload_process(upload_id=upload.pk).version.item


def _post_upload(client, upload_file, content, name="arith2", url="/datasets/new/", **extra):
    data = {"name": name, "description": "", "split_method": "ratio", "eval_ratio": "0.2", "split_seed": "1"}
    data |= {"split_column": "", "note": "", "file": upload_file("d.jsonl", content), **extra}
    return client.post(url, data)


def test_upload_form_queues_the_task_on_commit_and_redirects_to_progress(
    client_for, member, upload_file, django_capture_on_commit_callbacks
):
    with django_capture_on_commit_callbacks(execute=False) as callbacks:
        response = _post_upload(client_for(member), upload_file, _jsonl([{"question": "q", "answer": 1}]))
    upload = DatasetUpload.objects.get()
    assert response.status_code == 302 and response["Location"] == f"/datasets/uploads/{upload.pk}/"
    assert len(callbacks) == 1  # the task is sent only after the upload row is committed
    page = client_for(member).get(f"/datasets/uploads/{upload.pk}/status/").content.decode()
    assert 'hx-trigger="every 1s"' in page and 'data-status="pending"' in page


def test_upload_page_shows_row_errors_then_stops_polling(client_for, member, upload_file):
    _post_upload(client_for(member), upload_file, '{"question": "q"}\n{"question": "r", "answer": 2}\n')
    upload = services.dataset_upload_process(upload_id=DatasetUpload.objects.get().pk)
    body = client_for(member).get(f"/datasets/uploads/{upload.pk}/status/").content.decode()
    assert "line 1, field answer: required when tool_calls is absent" in body
    assert "hx-trigger" not in body and upload.status == UploadStatus.FAILED


def test_form_errors_for_duplicate_name_and_bad_extension(client_for, member, upload_file, dataset):
    client = client_for(member)
    assert (
        "already has a dataset with that name"
        in _post_upload(client, upload_file, "{}", name="arith").content.decode()
    )
    bad = _post_upload(client, upload_file, "{}", name="x", file=upload_file("d.txt", "hello"))
    assert "unsupported file type &#x27;.txt&#x27;" in bad.content.decode()
    assert DatasetUpload.objects.count() == 1


def test_detail_shows_preview_statistics_and_split_partial(client_for, member, dataset):
    client = client_for(member)
    body = client.get(dataset.get_absolute_url()).content.decode()
    assert 'id="row-count">5<' in body and "4 + 1?" in body and "<code>prompt</code>" in body
    rows = client.get(f"/datasets/{dataset.pk}/v/1/rows/?split=eval").content.decode()
    assert "No rows in the eval split." in rows and "The first 0" not in rows  # the dataset has no eval rows
    assert 'aria-pressed="true">Eval</button>' in rows


def test_user_text_is_escaped_everywhere(client_for, team, member, upload_file):
    row = {
        "question": XSS,
        "answer": XSS,
        "tool_calls": [{"name": XSS, "arguments": {"x": XSS}}],
        "note": XSS,
    }
    file = upload_file(f"{XSS}.jsonl", _jsonl([row]))
    upload = services.dataset_upload_create(
        team=team, user=member, name=XSS, file=file, description=XSS, note=XSS
    )
    version = services.dataset_upload_process(upload_id=upload.pk).version
    client = client_for(member)
    for url in (
        "/datasets/",
        version.item.get_absolute_url(),
        upload.get_absolute_url(),
        version.item.get_history_url(),
    ):
        body = client.get(url).content.decode()
        assert "<script>alert(1)" not in body and "<b>bold" not in body, url
        assert ESCAPED in body or ESCAPED.replace("&lt;/", "&lt;\\/") in body, url


def test_error_messages_with_user_text_are_escaped(client_for, team, member, upload_file):
    content = f"question,answer,part\nq,1,{XSS}\n"
    file = upload_file("d.csv", content)
    upload = services.dataset_upload_create(
        team=team, user=member, name="d", file=file, split_method="column", split_column="part"
    )
    services.dataset_upload_process(upload_id=upload.pk)
    body = client_for(member).get(upload.get_absolute_url()).content.decode()
    assert "<script>alert(1)" not in body and "split value &#x27;&lt;script&gt;" in body


def test_viewer_reads_but_cannot_upload(client_for, viewer, dataset, upload_file):
    client = client_for(viewer)
    assert client.get(dataset.get_absolute_url()).status_code == 200
    assert client.get("/datasets/new/").status_code == 403
    assert _post_upload(client, upload_file, "{}", url=f"/datasets/{dataset.pk}/edit/").status_code == 403


def test_other_team_gets_404_by_url_and_api(client_for, outsider, dataset):
    client = client_for(outsider)
    upload = dataset.versions.get().upload
    urls = [dataset.get_absolute_url(), f"/datasets/{dataset.pk}/edit/", f"/datasets/{dataset.pk}/v/1/rows/",
            upload.get_absolute_url(), f"/datasets/api/{dataset.pk}/", dataset.get_history_url()]  # fmt: skip
    for url in urls:
        assert client.get(url).status_code == 404, url
    assert client.get("/datasets/api/").json() == {"datasets": []}


def test_api_detail(client_for, member, dataset):
    body = client_for(member).get(f"/datasets/api/{dataset.pk}/").json()
    assert (
        body["version"]["rows"] == {"total": 5, "train": 5, "eval": 0}
        or body["version"]["rows"]["total"] == 5
    )
    assert body["preview"][0] == {
        "index": 0, "split": body["preview"][0]["split"], "prompt": "0 + 1?", "answer": "1",
        "tool_calls": None, "initial_state": None, "metadata": {},
    }  # fmt: skip


def test_a_deleted_dataset_leaves_the_list_and_gets_no_new_version(client_for, member, dataset):
    client = client_for(member)
    assert client.post(dataset.get_delete_url()).status_code == 302
    assert dataset.get_absolute_url() not in client.get("/datasets/").content.decode()
    assert client.get(f"/datasets/{dataset.pk}/edit/").status_code == 404
    assert client.get(dataset.get_history_url()).status_code == 200  # pinned versions stay readable
