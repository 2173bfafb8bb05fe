"""Streaming readers for dataset uploads (JSONL, CSV, Parquet): one record at a time, never the whole file."""

from __future__ import annotations

import csv
import io
import json
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any, BinaryIO

import pyarrow as pa
import pyarrow.parquet as pq

FORMATS = ("jsonl", "csv", "parquet")
EXTENSIONS = {".jsonl": "jsonl", ".ndjson": "jsonl", ".csv": "csv", ".parquet": "parquet", ".pq": "parquet"}
PARQUET_BATCH_ROWS = 1000


class FileError(Exception):
    """A problem with the file as a whole (size, encoding, emptiness, format): nothing of it is usable."""


@dataclass(frozen=True)
class RowError:
    """A problem located in one row, and in one field of it when known."""

    where: str
    message: str
    field: str | None = None

    def __str__(self) -> str:
        where = f"{self.where}, field {self.field}" if self.field else self.where
        return f"{where}: {self.message}"


@dataclass(frozen=True)
class RawRecord:
    """One row as read from the file, before validation; `where` names it for error messages."""

    where: str
    fields: dict[str, Any]


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
        raise FileError(f"the file is {size / 1e6:.1f} MB; the upload limit is {limit / 1e6:.1f} MB")


def read_records(handle: BinaryIO, fmt: str) -> Iterator[RawRecord | RowError]:
    """Yield each row of a binary file, or a RowError for a row that cannot be parsed at all.

    The caller may read `handle.tell()` between rows to report progress."""
    readers = {"jsonl": _read_jsonl, "csv": _read_csv, "parquet": _read_parquet}
    if fmt not in readers:
        raise FileError(f"unknown format {fmt!r}; use one of {', '.join(FORMATS)}")
    yield from readers[fmt](handle)


def _not_utf8(where: str, exc: UnicodeDecodeError) -> FileError:
    return FileError(
        f"the file is not UTF-8 text ({where}: byte 0x{exc.object[exc.start]:02x} cannot be decoded); "
        "save it as UTF-8 and upload it again"
    )


def _read_jsonl(handle: BinaryIO) -> Iterator[RawRecord | RowError]:
    for number, raw in enumerate(handle, start=1):
        where = f"line {number}"
        try:
            text = raw.decode("utf-8-sig" if number == 1 else "utf-8")
        except UnicodeDecodeError as exc:
            raise _not_utf8(where, exc) from None
        if not text.strip():
            continue
        try:
            value = json.loads(text)
        except json.JSONDecodeError as exc:
            yield RowError(where, f"invalid JSON: {exc.msg} at column {exc.colno}")
            continue
        if not isinstance(value, dict):
            yield RowError(where, f"expected a JSON object, got {type(value).__name__}")
            continue
        yield RawRecord(where, value)


def _read_csv(handle: BinaryIO) -> Iterator[RawRecord | RowError]:
    text = io.TextIOWrapper(handle, encoding="utf-8-sig", errors="strict", newline="")
    number = 0
    try:
        for number, row in enumerate(csv.DictReader(text, restkey="__extra__"), start=1):
            where = f"row {number}"
            if "__extra__" in row:
                yield RowError(where, f"{len(row['__extra__'])} more cells than the header has columns")
                continue
            # Empty cells mean "absent": CSV cannot tell an empty string from a missing value.
            yield RawRecord(where, {k: v for k, v in row.items() if k and v not in (None, "")})
    except UnicodeDecodeError as exc:
        raise _not_utf8(f"near row {number + 1}", exc) from None
    except csv.Error as exc:
        raise FileError(f"unreadable CSV near row {number + 1}: {exc}") from None
    finally:
        text.detach()  # the caller owns the handle; a collected wrapper would close it


def _read_parquet(handle: BinaryIO) -> Iterator[RawRecord | RowError]:
    try:
        parquet = pq.ParquetFile(handle)
    except (pa.ArrowInvalid, OSError) as exc:
        raise FileError(f"not a readable Parquet file: {exc}") from None
    number = 0
    for batch in parquet.iter_batches(batch_size=PARQUET_BATCH_ROWS):
        for row in batch.to_pylist():
            number += 1
            yield RawRecord(f"row {number}", {k: v for k, v in row.items() if v is not None})
