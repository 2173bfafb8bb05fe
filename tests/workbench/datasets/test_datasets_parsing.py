import datetime
import io
import json
from dataclasses import replace

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from workbench.datasets.limits import UploadLimits
from workbench.datasets.parquet import decoded_bytes
from workbench.datasets.parsing import check_head, check_size, format_for_filename, read_records
from workbench.datasets.records import FileError, RawRecord, RowError


def _write(tmp_path, name, data: bytes):
    path = tmp_path / name
    path.write_bytes(data)
    return path


def _read(path, fmt):
    with path.open("rb") as handle:
        return list(read_records(handle, fmt, UploadLimits.from_settings()))


def test_jsonl_malformed_line_reports_line_and_column(tmp_path):
    path = _write(tmp_path, "d.jsonl", b'{"prompt": "a", "answer": "1"}\n\n{"prompt": "b" "answer": 2}\n')
    items = _read(path, "jsonl")
    assert isinstance(items[0], RawRecord)
    assert str(items[1]) == "line 3: invalid JSON: Expecting ',' delimiter at column 16"


def test_jsonl_non_object_line_is_a_row_error(tmp_path):
    path = _write(tmp_path, "d.jsonl", b"[1, 2]\n")
    assert str(_read(path, "jsonl")[0]) == "line 1: expected a JSON object, got list"


def test_jsonl_not_utf8_is_a_file_error(tmp_path):
    text = '{"prompt": "ok", "answer": "1"}\n{"prompt": "café"}\n'
    path = _write(tmp_path, "d.jsonl", text.encode("latin-1"))
    with pytest.raises(FileError, match=r"not UTF-8 text \(line 2: byte 0xe9"):
        _read(path, "jsonl")


def test_jsonl_utf8_bom_is_accepted(tmp_path):
    line = json.dumps({"prompt": "p", "answer": "1"})
    path = _write(tmp_path, "d.jsonl", ("\ufeff" + line).encode())
    assert _read(path, "jsonl")[0].fields == {"prompt": "p", "answer": "1"}


def test_csv_rows_drop_empty_cells_and_flag_extra_cells(tmp_path):
    path = _write(tmp_path, "d.csv", b"question,answer,note\nWhat?,4,\nWhy?,5,x,extra\n")
    first, second = _read(path, "csv")
    assert first == RawRecord("row 1", {"question": "What?", "answer": "4"})
    assert str(second) == "row 2: 1 more cells than the header has columns"


def test_csv_not_utf8_is_a_file_error(tmp_path):
    path = _write(tmp_path, "d.csv", "question,answer\nné,1\n".encode("utf-16"))
    with pytest.raises(FileError, match="not UTF-8 text"):
        _read(path, "csv")


def test_parquet_rows_stream_in_batches(tmp_path):
    path = tmp_path / "d.parquet"
    table = pa.table({"question": [f"q{i}" for i in range(2500)], "answer": [str(i) for i in range(2500)]})
    pq.write_table(table, path, row_group_size=700)
    records = _read(path, "parquet")
    assert len(records) == 2500
    assert records[-1] == RawRecord("row 2500", {"question": "q2499", "answer": "2499"})


def test_parquet_garbage_is_a_file_error(tmp_path):
    path = _write(tmp_path, "d.parquet", b"not parquet at all")
    with pytest.raises(FileError, match="not a readable Parquet file"):
        _read(path, "parquet")


def test_size_checks():
    with pytest.raises(FileError, match="the file is empty"):
        check_size(0, 100)
    with pytest.raises(FileError, match=r"the file is 2\.0 MB; the upload limit is 1\.0 MB"):
        check_size(2_000_000, 1_000_000)


def test_format_from_extension():
    assert format_for_filename("A.JSONL") == "jsonl"
    with pytest.raises(FileError, match="unsupported file type '.txt'"):
        format_for_filename("a.txt")


def test_row_error_with_field_names_it():
    assert str(RowError("row 3", "required", "answer")) == "row 3, field answer: required"


def test_csv_reader_leaves_the_callers_handle_open(tmp_path):
    path = _write(tmp_path, "d.csv", b"question,answer\nq,1\n")
    with path.open("rb") as handle:
        assert len(list(read_records(handle, "csv", UploadLimits.from_settings()))) == 1
        assert not handle.closed and handle.tell() == path.stat().st_size


class _CountingFile(io.BytesIO):
    """A file that counts the bytes its readers took."""

    taken = 0

    def read(self, size=-1):
        data = super().read(size)
        self.taken += len(data)
        return data

    def readline(self, size=-1):
        data = super().readline(size)
        self.taken += len(data)
        return data


def test_a_wide_csv_header_is_refused_after_reading_one_row_limit_of_it():
    limits = UploadLimits.from_settings()
    handle = _CountingFile(("q," * 1_000_000 + "\n" + "x," * 1_000_000 + "\n").encode())
    with pytest.raises(FileError, match="the header has more than 256 columns, the limit"):
        check_head(handle, "csv", limits)
    assert handle.taken == limits.max_row_bytes + 1  # of 4 MB


def test_a_long_jsonl_line_is_refused_after_reading_one_row_limit_of_it():
    limits = replace(UploadLimits.from_settings(), max_row_bytes=1000)
    handle = _CountingFile(b'{"prompt": "p", "answer": "1"}\n{"prompt": "' + b"x" * 100_000 + b'"}\n')
    with pytest.raises(FileError, match=r"line 2 is longer than 1\.0 kB, the limit per row"):
        list(read_records(handle, "jsonl", limits))
    assert handle.taken <= 32 + limits.max_row_bytes + 1


def test_decoded_bytes_count_a_dictionary_entry_each_time_it_is_used(tmp_path):
    table = pa.table({
        "s": ["a" * 1000, None, "a" * 1000, "bb"],
        "lst": [["x" * 500, "x" * 500], None, [], ["y"]],
        "st": [{"k": "v" * 300, "n": 1}, None, {"k": None, "n": 2}, {"k": "w", "n": 3}],
        "m": pa.array([[("key", "z" * 200)], None, [], [("a", "b")]], pa.map_(pa.string(), pa.string())),
        "f": [1.0, 2.0, None, 4.0],
    })  # fmt: skip
    path = tmp_path / "d.parquet"
    pq.write_table(table, path)
    plain = next(pq.ParquetFile(path).iter_batches())
    texts = ["s", "lst.list.element", "st.k", "m.key_value.key", "m.key_value.value"]
    encoded = next(pq.ParquetFile(path, read_dictionary=texts).iter_batches())
    assert pa.types.is_dictionary(encoded.column("s").type)
    assert decoded_bytes(encoded) == decoded_bytes(plain) > 1000 + 1000 + 1000 + 300 + 200


def test_parquet_columns_of_any_arrow_type_are_read(tmp_path):
    table = pa.table({
        "question": ["q", "r"],
        "nothing": pa.array([None, None], pa.null()),
        "flag": [True, False],
        "day": pa.array([datetime.date(2026, 1, 2)] * 2),
        "codes": pa.array([1, 2]).dictionary_encode(),  # restored as a dictionary of ints
        "pair": pa.array([b"ab", b"cd"], pa.binary(2)),
        "big": pa.array([[1], [2, 3]], pa.large_list(pa.int64())),
        "fixed": pa.array([[1, 2], [3, 4]], pa.list_(pa.int64(), 2)),
    })  # fmt: skip
    path = tmp_path / "d.parquet"
    pq.write_table(table, path)
    records = _read(path, "parquet")
    assert records[1] == RawRecord("row 2", {
        "question": "r", "flag": False, "day": datetime.date(2026, 1, 2), "codes": 2, "pair": b"cd",
        "big": [2, 3], "fixed": [3, 4],
    })  # fmt: skip
