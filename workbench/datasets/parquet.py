"""Parquet uploads read within a byte budget: a small file may decode to far more than its size, through
compression or through one long dictionary entry repeated in every row.

Before reading, the footer must promise no more columns than the limit and no more decoded bytes
(uncompressed pages, or value count x width where that is larger) than the expanded-size limit. While
reading, text and binary columns stay dictionary-encoded, so each batch's decoded size is computed from
the dictionary and its indices before any value is built: the total must stay within the expanded-size
limit and each row within the row limit."""

from __future__ import annotations

from collections.abc import Iterator
from typing import BinaryIO

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq

from workbench.datasets.limits import UploadLimits, size_text
from workbench.datasets.records import FileError, RawRecord

BATCH_ROWS = 64  # rows turned into Python values at a time: at most 64 x the row limit in memory
_FIXED_WIDTH = {"BOOLEAN": 1, "INT32": 4, "INT64": 8, "INT96": 12, "FLOAT": 4, "DOUBLE": 8}
_OFFSET_BYTES = 4  # a decoded variable-length value (or list) also takes its offset


def read_parquet(handle: BinaryIO, limits: UploadLimits) -> Iterator[RawRecord]:
    """Each row as a RawRecord, or FileError as soon as a limit is passed (the limit named)."""
    parquet = _open(handle, limits)
    spent, first = 0, 1
    try:
        for batch in parquet.iter_batches(batch_size=BATCH_ROWS):
            size = decoded_bytes(batch)
            spent += size
            if spent > limits.max_expanded_bytes:
                raise FileError(_expands_past(limits, f"passed by row {first + batch.num_rows - 1}"))
            if size > limits.max_row_bytes:
                _check_rows(batch, first, limits)
            for number, row in enumerate(batch.to_pylist(), start=first):
                yield RawRecord(f"row {number}", {k: v for k, v in row.items() if v is not None})
            first += batch.num_rows
    except (pa.ArrowException, OSError, ValueError, OverflowError) as exc:
        raise FileError(f"unreadable Parquet data near row {first}: {exc}") from None


def _open(handle: BinaryIO, limits: UploadLimits) -> pq.ParquetFile:
    try:
        footer = pq.ParquetFile(handle).metadata
    except (pa.ArrowException, OSError) as exc:
        raise FileError(f"not a readable Parquet file: {exc}") from None
    if footer.num_columns > limits.max_columns:
        raise FileError(
            f"the file has {footer.num_columns} columns; the limit is {limits.max_columns} columns"
        )
    promised = footer_decoded_bytes(footer)
    if promised > limits.max_expanded_bytes:
        raise FileError(_expands_past(limits, f"its footer says {size_text(promised)}"))
    schema = footer.schema
    text = [
        schema.column(i).path
        for i in range(len(schema))
        if schema.column(i).physical_type == "BYTE_ARRAY" and schema.column(i).logical_type.type != "DECIMAL"
    ]
    return pq.ParquetFile(handle, metadata=footer, read_dictionary=text)


def footer_decoded_bytes(footer: pq.FileMetaData) -> int:
    """What the footer says the columns decode to: per column chunk, its uncompressed size or its value
    count x the value's width, whichever is larger (run-length encoding packs many values in few bytes)."""
    schema, total = footer.schema, 0
    for g in range(footer.num_row_groups):
        group = footer.row_group(g)
        for c in range(group.num_columns):
            chunk, column = group.column(c), schema.column(c)
            width = _FIXED_WIDTH.get(chunk.physical_type) or column.length or _OFFSET_BYTES
            total += max(chunk.total_uncompressed_size, chunk.num_values * width)
    return total


def decoded_bytes(data: pa.RecordBatch | pa.Array) -> int:
    """Bytes `data` takes once every value is decoded: a dictionary entry counts each time it is used."""
    if isinstance(data, pa.RecordBatch):
        return sum(decoded_bytes(column) for column in data.columns)
    kind = data.type
    if pa.types.is_dictionary(kind):
        if not _is_variable_width(kind.value_type):  # fixed width: as large as the footer says
            return decoded_bytes(data.dictionary.take(data.indices))
        entry_bytes = pc.fill_null(pc.binary_length(data.dictionary), 0)
        return _sum(pc.take(entry_bytes, data.indices)) + _OFFSET_BYTES * len(data)
    if pa.types.is_map(kind):
        return _OFFSET_BYTES * len(data) + decoded_bytes(data.keys) + decoded_bytes(data.items)
    if pa.types.is_list(kind) or pa.types.is_large_list(kind) or pa.types.is_fixed_size_list(kind):
        return _OFFSET_BYTES * len(data) + decoded_bytes(data.flatten())
    if pa.types.is_struct(kind):
        return sum(decoded_bytes(child) for child in data.flatten())
    if _is_variable_width(kind):
        return _sum(pc.binary_length(data)) + _OFFSET_BYTES * len(data)
    return len(data) * _value_bytes(kind)


def _value_bytes(kind: pa.DataType) -> int:
    """Bytes of one value of a fixed-width type: a bit rounds up to a byte, null takes none."""
    return 0 if pa.types.is_null(kind) else max(1, kind.bit_width // 8)


def _is_variable_width(kind: pa.DataType) -> bool:
    checks = (pa.types.is_string, pa.types.is_large_string, pa.types.is_binary, pa.types.is_large_binary)
    return any(check(kind) for check in checks)


def _sum(values: pa.Array) -> int:
    return pc.sum(values).as_py() or 0


def _check_rows(batch: pa.RecordBatch, first: int, limits: UploadLimits) -> None:
    """Measure each row of a batch larger than one row may be, before any of its values is built."""
    for i in range(batch.num_rows):
        size = decoded_bytes(batch.slice(i, 1))
        if size > limits.max_row_bytes:
            raise FileError(
                f"row {first + i} decodes to {size_text(size)}; "
                f"the limit is {size_text(limits.max_row_bytes)} per row"
            )


def _expands_past(limits: UploadLimits, how: str) -> str:
    limit = size_text(limits.max_expanded_bytes)
    return f"the file decodes to more than {limit}, the limit on a compressed file's decoded data ({how})"
