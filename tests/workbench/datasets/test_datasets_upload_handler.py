"""The upload limit holds while the body streams in: past DATASET_MAX_UPLOAD_BYTES nothing more is read.

The request body is a stream that makes its bytes on demand and counts what was read of it, so the tests
see how much of a 40 MB body the server consumed before it answered."""

import pytest
from django.test import Client
from django.test.client import BOUNDARY, MULTIPART_CONTENT, encode_multipart

from workbench.datasets.models import DatasetUpload

LIMIT = 1_000_000
CHUNK = 64 * 1024  # Django's upload chunk: the parser reads the body in chunks of this size
PART_HEADERS = 1024  # room for the file parts' own multipart headers
FIELDS = {"name": "big", "description": "", "split_method": "ratio", "eval_ratio": "0.1", "split_seed": "0"}
FIELDS |= {"split_column": "", "note": "kept"}


class CountingBody:
    """A multipart body: the form fields, then file parts of `sizes` bytes each, made as they are read."""

    def __init__(self, sizes: list[int], fields: dict[str, str] = FIELDS) -> None:
        head = encode_multipart(BOUNDARY, fields)[: -len(f"--{BOUNDARY}--\r\n")]
        self.parts = [head]
        for i, size in enumerate(sizes):
            disposition = f'Content-Disposition: form-data; name="file"; filename="d{i}.jsonl"'
            self.parts.append(
                f"--{BOUNDARY}\r\n{disposition}\r\nContent-Type: application/jsonl\r\n\r\n".encode()
            )
            self.parts.append(size)  # an int: that many bytes of JSONL, made on demand
            self.parts.append(b"\r\n")
        self.parts.append(f"--{BOUNDARY}--\r\n".encode())
        self.length = sum(p if isinstance(p, int) else len(p) for p in self.parts)
        self.head_length = len(head)
        self.consumed = 0
        self._pieces = self._generate()
        self._buffer = b""

    def _generate(self):
        line = b'{"question": "q", "answer": "1"}\n'
        for part in self.parts:
            if isinstance(part, bytes):
                yield part
                continue
            whole, rest = divmod(part, len(line))
            for _ in range(whole // 1000):
                yield line * 1000
            yield line * (whole % 1000) + b" " * rest

    def read(self, size: int = -1) -> bytes:
        while (size < 0 or len(self._buffer) < size) and (piece := next(self._pieces, None)) is not None:
            self._buffer += piece
        data, self._buffer = (self._buffer, b"") if size < 0 else (self._buffer[:size], self._buffer[size:])
        self.consumed += len(data)
        return data

    def readline(self, size: int = -1) -> bytes:
        raise AssertionError("multipart parsing reads in chunks")


def _post(client: Client, body: CountingBody, url: str = "/datasets/new/"):
    environ = {"wsgi.input": body, "CONTENT_LENGTH": str(body.length), "CONTENT_TYPE": MULTIPART_CONTENT}
    return client.generic("POST", url, **environ)


@pytest.fixture
def temp_dir(settings, tmp_path):
    """Where Django spools uploads over FILE_UPLOAD_MAX_MEMORY_SIZE; small here, so every file goes there."""
    settings.FILE_UPLOAD_TEMP_DIR = str(tmp_path / "upload-tmp")
    settings.FILE_UPLOAD_MAX_MEMORY_SIZE = 10_000
    (tmp_path / "upload-tmp").mkdir()
    return tmp_path / "upload-tmp"


@pytest.fixture
def limit(settings):
    settings.DATASET_MAX_UPLOAD_BYTES = LIMIT
    return LIMIT


def _files(root):
    return sorted(p for p in root.rglob("*") if p.is_file()) if root.exists() else []


def test_a_body_past_the_limit_is_read_no_further(client_for, member, limit, temp_dir, media_root):
    body = CountingBody([40 * limit])
    response = _post(client_for(member), body)
    page = response.content.decode()
    assert response.status_code == 200
    assert "the file is larger than the upload limit of 1.0 MB" in page
    # Read: the fields, the limit and at most a few chunks of look-ahead; not the other 39 MB.
    assert body.consumed - body.head_length <= limit + CHUNK + PART_HEADERS < body.length // 10
    # The fields sent before the file survive; the form names only the file's problem.
    assert 'value="big"' in page and 'value="kept"' in page and "This field is required" not in page
    assert DatasetUpload.objects.count() == 0
    assert _files(media_root) == [] and _files(temp_dir) == []


def test_the_limit_counts_every_file_part_of_the_request(client_for, member, limit, temp_dir, media_root):
    body = CountingBody([600_000, 600_000, 600_000])  # each under the limit, together over it
    response = _post(client_for(member), body)
    assert "the file is larger than the upload limit" in response.content.decode()
    assert body.consumed - body.head_length <= limit + CHUNK + PART_HEADERS
    assert DatasetUpload.objects.count() == 0 and _files(media_root) == [] and _files(temp_dir) == []


def test_a_new_version_past_the_limit_is_refused_the_same_way(
    client_for, member, team, limit, temp_dir, media_root, upload_file
):
    from workbench.datasets import services

    file = upload_file("d.jsonl", '{"question": "q", "answer": "1"}\n')
    upload = services.dataset_upload_create(team=team, user=member, name="d", file=file, process_now=True)
    before = _files(media_root)
    body = CountingBody([5 * limit])
    response = _post(client_for(member), body, url=f"/datasets/{upload.version.item.pk}/edit/")
    assert "the file is larger than the upload limit of 1.0 MB" in response.content.decode()
    assert body.consumed - body.head_length <= limit + CHUNK + PART_HEADERS
    assert DatasetUpload.objects.count() == 1 and _files(media_root) == before and _files(temp_dir) == []


def test_a_body_within_the_limit_is_uploaded(client_for, member, limit, temp_dir, media_root):
    body = CountingBody([limit // 2])
    response = _post(client_for(member), body)
    upload = DatasetUpload.objects.get()
    assert response.status_code == 302 and response["Location"] == upload.get_absolute_url()
    assert body.consumed == body.length and upload.name == "big" and upload.note == "kept"
    assert len(_files(media_root)) == 1 and _files(temp_dir) == []


def test_csrf_is_still_checked_on_the_upload_views(member, limit, db):
    client = Client(enforce_csrf_checks=True)
    client.force_login(member)
    assert _post(client, CountingBody([1000])).status_code == 403
    assert DatasetUpload.objects.count() == 0
    client.get("/datasets/new/")  # sets the CSRF cookie, as a browser gets it with the form
    token = {"csrfmiddlewaretoken": client.cookies["csrftoken"].value}
    assert _post(client, CountingBody([1000], fields={**token, **FIELDS})).status_code == 302
    assert DatasetUpload.objects.count() == 1
