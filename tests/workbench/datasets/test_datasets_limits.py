"""Caps on what an upload may hold, and what every refusal leaves behind: a clear message naming the limit,
no "internal error", and no file in media or in the upload temp dir."""

import datetime
import decimal
import io
import json

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from workbench.datasets import services
from workbench.datasets.models import DatasetRow, DatasetUpload, UploadStatus

FORM = {"name": "d", "description": "", "split_method": "ratio", "eval_ratio": "0.1", "split_seed": "0"}
FORM |= {"split_column": "", "note": ""}
GOOD = '{"question": "q", "answer": "1"}\n'


def _files(root):
    return sorted(p for p in root.rglob("*") if p.is_file()) if root.exists() else []


@pytest.fixture
def temp_dir(settings, tmp_path):
    settings.FILE_UPLOAD_TEMP_DIR = str(tmp_path / "upload-tmp")
    settings.FILE_UPLOAD_MAX_MEMORY_SIZE = 10_000  # larger files are spooled to the temp dir
    (tmp_path / "upload-tmp").mkdir()
    return tmp_path / "upload-tmp"


def _post(client, upload_file, name: str, content: bytes | str):
    return client.post("/datasets/new/", {**FORM, "file": upload_file(name, content)})


def _processed(team, member, upload_file, name: str, content: bytes | str) -> DatasetUpload:
    """Upload then run the task's work (as the worker does: unexpected errors are recorded, then raised)."""
    upload = services.dataset_upload_create(team=team, user=member, name="d", file=upload_file(name, content))
    return services.dataset_upload_run(upload_id=upload.pk)


def _refused(upload: DatasetUpload, media_root) -> str:
    """The refusal's messages, after checking that it failed cleanly: nothing stored, no file kept."""
    upload.refresh_from_db()
    assert upload.status == UploadStatus.FAILED and upload.version is None
    assert not any("internal error" in e for e in upload.errors), upload.errors
    assert DatasetRow.objects.count() == 0 and _files(media_root) == []
    return "\n".join(upload.errors)


def _parquet(table: pa.Table, **options) -> bytes:
    out = io.BytesIO()
    pq.write_table(table, out, **options)
    return out.getvalue()


# Columns ------------------------------------------------------------------------------------------------


def test_a_million_column_csv_is_refused_at_the_form(client_for, member, upload_file, temp_dir, media_root):
    header = ",".join(f"c{i}" for i in range(1_000_000))
    content = f"question,answer,{header}\nq,1,{','.join('x' * 1_000_000)}\n"
    page = _post(client_for(member), upload_file, "wide.csv", content).content.decode()
    assert "has more than 256 columns, the limit" in page
    assert DatasetUpload.objects.count() == 0 and _files(media_root) == [] and _files(temp_dir) == []


def test_a_csv_header_within_the_row_limit_but_over_the_column_limit(
    client_for, member, upload_file, settings, media_root
):
    settings.DATASET_MAX_COLUMNS = 10
    content = "question,answer," + ",".join(f"c{i}" for i in range(20)) + "\nq,1\n"
    page = _post(client_for(member), upload_file, "wide.csv", content).content.decode()
    assert "the header has 22 columns; the limit is 10 columns" in page
    assert DatasetUpload.objects.count() == 0 and _files(media_root) == []


def test_rows_that_together_bring_too_many_fields_are_refused(
    team, member, upload_file, settings, media_root
):
    settings.DATASET_MAX_COLUMNS = 10
    lines = "".join(json.dumps({"question": "q", "answer": "1", f"extra{i}": i}) + "\n" for i in range(20))
    upload = _processed(team, member, upload_file, "d.jsonl", lines)
    assert "more than 10 distinct fields" in _refused(upload, media_root)


def test_a_jsonl_row_with_too_many_fields_is_a_row_error(team, member, upload_file, settings, media_root):
    settings.DATASET_MAX_COLUMNS = 10
    wide = json.dumps({"question": "q", "answer": "1", **{f"k{i}": i for i in range(20)}})
    upload = _processed(team, member, upload_file, "d.jsonl", GOOD + wide + "\n")
    assert "line 2: 22 fields; the limit is 10 columns" in _refused(upload, media_root)


# Row size ---------------------------------------------------------------------------------------------------


def test_a_line_over_the_row_limit_is_refused(team, member, upload_file, settings, media_root):
    settings.DATASET_MAX_ROW_BYTES = 1000
    long = json.dumps({"question": "x" * 5000, "answer": "1"})
    upload = _processed(team, member, upload_file, "d.jsonl", GOOD + long + "\n")
    assert "line 2 is longer than 1.0 kB, the limit per row" in _refused(upload, media_root)


def test_a_first_line_over_the_row_limit_is_refused_at_the_form(
    client_for, member, upload_file, settings, media_root
):
    settings.DATASET_MAX_ROW_BYTES = 1000
    content = json.dumps({"question": "x" * 5000, "answer": "1"}) + "\n" + GOOD
    page = _post(client_for(member), upload_file, "d.jsonl", content).content.decode()
    assert "line 1 is longer than 1.0 kB, the limit per row" in page
    assert DatasetUpload.objects.count() == 0 and _files(media_root) == []


def test_a_csv_record_over_the_row_limit_is_refused(team, member, upload_file, settings, media_root):
    settings.DATASET_MAX_ROW_BYTES = 1000
    many_lines = '"' + "line\n" * 400 + '"'  # one quoted cell spread over 400 short lines
    content = f"question,answer\nq,1\n{many_lines},1\n"
    upload = _processed(team, member, upload_file, "d.csv", content)
    assert "row 2 (line 202) is longer than 1.0 kB, the limit per row" in _refused(upload, media_root)


# Parquet's expanded size ------------------------------------------------------------------------------------


def test_a_highly_compressed_parquet_is_refused_by_its_footer(
    client_for, member, upload_file, settings, media_root
):
    settings.DATASET_MAX_EXPANDED_BYTES = 5_000_000
    table = pa.table({"question": ["x" * 100_000 + str(i) for i in range(200)], "answer": ["1"] * 200})
    content = _parquet(table, compression="zstd", use_dictionary=False)
    assert len(content) < 100_000  # 20 MB of text in a few kB
    page = _post(client_for(member), upload_file, "d.parquet", content).content.decode()
    assert "decodes to more than 5.0 MB, the limit on a compressed file" in page
    assert "its footer says 20.0 MB" in page
    assert DatasetUpload.objects.count() == 0 and _files(media_root) == []


def test_a_parquet_repeating_one_dictionary_entry_is_refused_while_read(
    team, member, upload_file, settings, media_root
):
    """The footer promises little (one 200 kB dictionary entry); decoded, every row after the first 64 (what
    the form reads) repeats it, and the task stops at the batch that passes the limit."""
    settings.DATASET_MAX_EXPANDED_BYTES = 5_000_000
    table = pa.table({"question": ["q"] * 64 + ["y" * 200_000] * 1000, "answer": ["1"] * 1064})
    content = _parquet(table, compression="zstd")
    footer = pq.ParquetFile(io.BytesIO(content)).metadata
    promised = sum(footer.row_group(0).column(c).total_uncompressed_size for c in range(2))
    assert promised < 1_000_000  # the footer alone cannot tell
    upload = _processed(team, member, upload_file, "d.parquet", content)
    message = _refused(upload, media_root)
    assert (
        "decodes to more than 5.0 MB, the limit on a compressed file's decoded data (passed by row" in message
    )


def test_a_parquet_row_over_the_row_limit_is_refused(team, member, upload_file, settings, media_root):
    settings.DATASET_MAX_ROW_BYTES = 10_000
    questions = ["q"] * 100 + ["z" * 50_000] + ["q"] * 5
    content = _parquet(pa.table({"question": questions, "answer": ["1"] * 106}))
    upload = _processed(team, member, upload_file, "d.parquet", content)
    assert "row 101 decodes to 50.0 kB; the limit is 10.0 kB per row" in _refused(upload, media_root)


# Values the database or the code after it cannot take -------------------------------------------------------


@pytest.mark.parametrize(
    ("line", "message"),
    [
        ('{"question": "q", "answer": "1", "metadata": {"a": ' + "[" * 5000 + "]" * 5000 + "}}",
         "line 2: nested deeper than 64 levels, the limit"),
        ('{"question": "q", "answer": "1", "metadata": {"a": ' + "[" * 100 + "]" * 100 + "}}",
         "line 2, field metadata: nested deeper than 64 levels, the limit"),
        ('{"question": "q", "answer": ' + "7" * 5000 + "}",
         "line 2: an integer longer than 100 digits, the limit (write longer numbers as text)"),
        ('{"question": "q", "answer": "1", "score": NaN}',
         "line 2, field score: nan is not a JSON number; use null (or an empty cell) when missing"),
        ('{"question": "q", "answer": "1", "score": 1e999}',
         "line 2, field score: inf is not a JSON number"),
        ('{"question": "a\\u0000b", "answer": "1"}',
         "line 2, field question: contains a NUL character (\\u0000), which cannot be stored"),
        ('{"question": "q", "answer": "\\ud800"}',
         "line 2, field answer: contains an unpaired surrogate (\\ud800), which is not text"),
    ],
    ids=["nesting-5000", "nesting-100", "digits-5000", "nan", "infinity", "nul", "lone-surrogate"],
)  # fmt: skip
def test_values_that_cannot_be_stored_are_row_errors(team, member, upload_file, media_root, line, message):
    upload = _processed(team, member, upload_file, "d.jsonl", GOOD + line + "\n")
    assert message in _refused(upload, media_root)


def test_json_cells_of_a_csv_are_checked_too(team, member, upload_file, media_root):
    deep = "[" * 3000 + "]" * 3000
    content = f'question,answer,metadata,initial_state\nq,1,"{{""a"": NaN}}",{deep}\n'
    message = _refused(_processed(team, member, upload_file, "d.csv", content), media_root)
    assert "row 1, field metadata: nan is not a JSON number" in message
    assert "row 1, field initial_state: nested deeper than 64 levels" in message


def test_parquet_nan_is_refused_and_its_other_scalars_are_stored_as_text(
    team, member, upload_file, media_root
):
    nan = pa.table({"question": ["q", "r"], "answer": ["1", "2"], "score": [0.5, float("nan")]})
    assert "row 2, field score: nan is not a JSON number" in _refused(
        _processed(team, member, upload_file, "nan.parquet", _parquet(nan)), media_root
    )
    scalars = pa.table({
        "question": ["q"], "answer": ["1"],
        "price": pa.array([decimal.Decimal("12.50")], pa.decimal128(6, 2)),
        "when": pa.array([datetime.datetime(2026, 1, 2, 3, 4, 5)]),
        "raw": pa.array([b"\xff\x00"]),
    })  # fmt: skip
    upload = _processed(team, member, upload_file, "scalars.parquet", _parquet(scalars))
    assert upload.status == UploadStatus.DONE, upload.errors
    row = upload.version.rows.get()
    assert row.metadata == {"price": "12.50", "when": "2026-01-02T03:04:05", "raw": "/wA="}


def test_an_unexpected_failure_still_removes_the_file(team, member, upload_file, media_root, monkeypatch):
    def broken(*args, **kwargs):
        raise RuntimeError("disk gone")

    monkeypatch.setattr(services, "stored_rows", broken)
    upload = services.dataset_upload_create(
        team=team, user=member, name="d", file=upload_file("d.jsonl", GOOD)
    )
    assert len(_files(media_root)) == 1
    with pytest.raises(RuntimeError):
        services.dataset_upload_run(upload_id=upload.pk)
    upload.refresh_from_db()
    assert upload.status == UploadStatus.FAILED and upload.errors == [
        "internal error: RuntimeError: disk gone"
    ]
    assert _files(media_root) == []
