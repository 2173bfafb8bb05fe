"""Streaming readers for dataset uploads (JSONL, CSV, Parquet): one record at a time, never the whole file,
and never more of one line than the row limit."""

from __future__ import annotations

import csv
import json
from collections.abc import Iterator
from pathlib import Path
from typing import BinaryIO

from workbench.datasets.limits import UploadLimits, size_text
from workbench.datasets.parquet import read_parquet
from workbench.datasets.records import FileError, RawRecord, RowError
from workbench.datasets.values import ValueProblem, parse

FORMATS = ("jsonl", "csv", "parquet")
EXTENSIONS = {".jsonl": "jsonl", ".ndjson": "jsonl", ".csv": "csv", ".parquet": "parquet", ".pq": "parquet"}


def format_for_filename(filename: str) -> str:
    """The upload format implied by the file's extension."""
    fmt = EXTENSIONS.get(Path(filename).suffix.lower())
    if fmt is None:
        known = ", ".join(sorted(EXTENSIONS))
        raise FileError(f"unsupported file type {Path(filename).suffix or '(none)'!r}; use one of {known}")
    return fmt


def check_size(size: int, limit: int) -> None:
    """Reject empty and over-size files before reading them."""
    if size == 0:
        raise FileError("the file is empty")
    if size > limit:
        raise FileError(f"the file is {size_text(size)}; the upload limit is {size_text(limit)}")


def read_records(handle: BinaryIO, fmt: str, limits: UploadLimits) -> Iterator[RawRecord | RowError]:
    """Yield each row of a binary file, or a RowError for a row that cannot be parsed at all; FileError
    when the file as a whole is unusable or passes a limit.

    The caller may read `handle.tell()` between rows to report progress."""
    readers = {"jsonl": _read_jsonl, "csv": _read_csv, "parquet": read_parquet}
    if fmt not in readers:
        raise FileError(f"unknown format {fmt!r}; use one of {', '.join(FORMATS)}")
    yield from readers[fmt](handle, limits)


def check_head(handle: BinaryIO, fmt: str, limits: UploadLimits) -> None:
    """Raise FileError for what the file's start (CSV header, first line) or Parquet footer shows, reading
    at most one row: lets an upload be refused before it is stored."""
    records = read_records(handle, fmt, limits)
    try:
        next(records, None)
    finally:
        records.close()


class _RowTooLong(Exception):
    def __init__(self, number: int, partial: bytes) -> None:
        super().__init__(number)
        self.number, self.partial = number, partial


class _Lines:
    """The byte lines of a file, never reading more than `limit` bytes for one record: a record is the
    lines since the last `reset()` (a CSV record may span lines). Past it, _RowTooLong holds the line's
    start; `number` is the last line's number."""

    def __init__(self, handle: BinaryIO, limit: int) -> None:
        self.handle, self.limit, self.used, self.number = handle, limit, 0, 0

    def __iter__(self) -> _Lines:
        return self

    def __next__(self) -> bytes:
        line = self.handle.readline(self.limit - self.used + 1)
        if not line:
            raise StopIteration
        self.number += 1
        self.used += len(line)
        if self.used > self.limit:
            raise _RowTooLong(self.number, line)
        return line

    def reset(self) -> None:
        self.used = 0

    def decoded(self) -> Iterator[str]:
        for raw in self:
            yield raw.decode("utf-8-sig" if self.number == 1 else "utf-8")


def _not_utf8(where: str, exc: UnicodeDecodeError) -> FileError:
    return FileError(
        f"the file is not UTF-8 text ({where}: byte 0x{exc.object[exc.start]:02x} cannot be decoded); "
        "save it as UTF-8 and upload it again"
    )


def _read_jsonl(handle: BinaryIO, limits: UploadLimits) -> Iterator[RawRecord | RowError]:
    lines = _Lines(handle, limits.max_row_bytes)
    try:
        for raw in lines:
            lines.reset()
            record = _jsonl_record(f"line {lines.number}", raw, lines.number, limits)
            if record is not None:
                yield record
    except _RowTooLong as exc:
        raise FileError(f"line {exc.number} is longer than {_row_limit(limits)}") from None


def _jsonl_record(where: str, raw: bytes, number: int, limits: UploadLimits) -> RawRecord | RowError | None:
    try:
        text = raw.decode("utf-8-sig" if number == 1 else "utf-8")
    except UnicodeDecodeError as exc:
        raise _not_utf8(where, exc) from None
    if not text.strip():
        return None
    try:
        value = parse(text, limits)
    except json.JSONDecodeError as exc:
        return RowError(where, f"invalid JSON: {exc.msg} at column {exc.colno}")
    except ValueProblem as exc:
        return RowError(where, str(exc))
    if not isinstance(value, dict):
        return RowError(where, f"expected a JSON object, got {type(value).__name__}")
    if len(value) > limits.max_columns:
        return RowError(where, f"{len(value)} fields; the limit is {limits.max_columns} columns")
    return RawRecord(where, value)


def _read_csv(handle: BinaryIO, limits: UploadLimits) -> Iterator[RawRecord | RowError]:
    lines = _Lines(handle, limits.max_row_bytes)
    header: list[str] | None = None
    number = 0
    try:
        for cells in csv.reader(lines.decoded()):
            lines.reset()
            if header is None:
                header = _csv_header(cells, limits)
            elif cells:
                number += 1
                yield _csv_record(f"row {number}", header, cells)
    except _RowTooLong as exc:
        raise _csv_too_long("the header" if header is None else f"row {number + 1}", exc, limits) from None
    except UnicodeDecodeError as exc:
        raise _not_utf8(f"line {lines.number}", exc) from None
    except csv.Error as exc:
        raise FileError(f"unreadable CSV near row {number + 1}: {exc}") from None


def _csv_header(cells: list[str], limits: UploadLimits) -> list[str]:
    if len(cells) > limits.max_columns:
        raise FileError(f"the header has {len(cells)} columns; the limit is {limits.max_columns} columns")
    return cells


def _csv_record(where: str, header: list[str], cells: list[str]) -> RawRecord | RowError:
    if len(cells) > len(header):
        return RowError(where, f"{len(cells) - len(header)} more cells than the header has columns")
    # Empty cells mean "absent": CSV cannot tell an empty string from a missing value.
    return RawRecord(where, {k: v for k, v in zip(header, cells, strict=False) if k and v != ""})


def _csv_too_long(where: str, exc: _RowTooLong, limits: UploadLimits) -> FileError:
    """The column limit when the part read already has more cells than it allows, else the row limit."""
    try:
        cells = len(next(csv.reader([exc.partial.decode("utf-8", "replace")]), []))
    except csv.Error:
        cells = 0
    if cells > limits.max_columns:
        return FileError(f"{where} has more than {limits.max_columns} columns, the limit")
    return FileError(f"{where} (line {exc.number}) is longer than {_row_limit(limits)}")


def _row_limit(limits: UploadLimits) -> str:
    return f"{size_text(limits.max_row_bytes)}, the limit per row"
