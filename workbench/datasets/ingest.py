"""Read an uploaded file twice: first validate every row and gather statistics (with progress), then,
only if the whole file is valid, store its rows in bulk batches."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from workbench.datasets.conversations import validate_conversation
from workbench.datasets.limits import UploadLimits
from workbench.datasets.models import DatasetKind
from workbench.datasets.parsing import check_size, read_records
from workbench.datasets.records import FileError, RawRecord, RowError
from workbench.datasets.rows import RowData, validate_record
from workbench.datasets.splits import EVAL, TRAIN, eval_indices, split_from_value
from workbench.datasets.statistics import FieldStatistics

MAX_REPORTED_ERRORS = 50
PROGRESS_EVERY_ROWS = 1000

Progress = Callable[[float, str], None]


@dataclass(frozen=True)
class SplitConfig:
    method: str  # "ratio" or "column"
    eval_ratio: float = 0.1
    seed: int = 0
    column: str = ""


@dataclass
class Report:
    """Outcome of the validation pass: statistics when valid, else the first errors and how many."""

    rows: int = 0
    eval_rows: int = 0
    errors: list[str] = field(default_factory=list)
    error_count: int = 0
    statistics: dict[str, Any] = field(default_factory=dict)

    def add_error(self, message: str) -> None:
        self.error_count += 1
        if len(self.errors) < MAX_REPORTED_ERRORS:
            self.errors.append(message)

    def messages(self) -> list[str]:
        hidden = self.error_count - len(self.errors)
        return self.errors + ([f"... and {hidden} more problems"] if hidden else [])


def _records(
    handle, fmt: str, split: SplitConfig, limits: UploadLimits, kind: str
) -> Iterator[tuple[str, RowData | list[RowError], str]]:
    """(where, validated row or its errors, split) per record; parse errors come as a one-error list."""
    validate = validate_conversation if kind == DatasetKind.CONVERSATIONS else validate_record
    for record in read_records(handle, fmt, limits):
        if isinstance(record, RowError):
            yield record.where, [record], TRAIN
            continue
        row = validate(record.where, record.fields, limits)
        chosen, split_error = _column_split(record, split)
        if split_error is not None:
            row = (row if isinstance(row, list) else []) + [split_error]
        yield record.where, row, chosen


def _column_split(record: RawRecord, split: SplitConfig) -> tuple[str, RowError | None]:
    if split.method != "column":
        return TRAIN, None
    try:
        return split_from_value(record.fields.get(split.column)), None
    except ValueError as exc:
        return TRAIN, RowError(record.where, str(exc), split.column)


def validate_file(
    path: Path,
    fmt: str,
    split: SplitConfig,
    limits: UploadLimits,
    progress: Progress,
    kind: str = DatasetKind.PROMPTS,
) -> Report:
    """Pass 1: every problem (by row and field) and per-field statistics; stores nothing. `kind` says
    what a row is: a prompt with its ground truth, or a conversation (a DatasetKind)."""
    report, stats = Report(), FieldStatistics()
    size = path.stat().st_size
    try:
        check_size(size, limits.max_upload_bytes)
        with path.open("rb") as handle:
            for _, row, chosen in _records(handle, fmt, split, limits, kind):
                report.rows += 1
                report.eval_rows += chosen == EVAL
                for error in row if isinstance(row, list) else []:
                    report.add_error(str(error))
                if not isinstance(row, list):
                    stats.add(_stat_fields(row))
                    _check_columns(stats, limits)
                if report.rows % PROGRESS_EVERY_ROWS == 0:
                    progress(handle.tell() / size, f"Checked {report.rows} rows")
    except FileError as exc:
        report.add_error(str(exc))
        return report
    if report.rows == 0:
        report.add_error("the file has no rows")
    if split.method == "ratio":
        report.eval_rows = round(report.rows * split.eval_ratio)  # what eval_indices draws in pass 2
    report.statistics = stats.result()
    return report


def _check_columns(stats: FieldStatistics, limits: UploadLimits) -> None:
    """Rows may each keep to the column limit yet bring new fields: the dataset as a whole must too."""
    if stats.field_count > limits.max_columns:
        raise FileError(
            f"the rows have more than {limits.max_columns} distinct fields (prompt, answer, metadata "
            f"keys...); the limit is {limits.max_columns} columns"
        )


def _stat_fields(row: RowData) -> dict[str, Any]:
    fields = {"prompt": row.prompt, "answer": row.answer, "tool_calls": row.tool_calls}
    fields["initial_state"], fields["messages"] = row.initial_state, row.messages
    fields.update({f"metadata.{k}": v for k, v in row.metadata.items()})
    return {k: v for k, v in fields.items() if v is not None}


def stored_rows(
    path: Path,
    fmt: str,
    split: SplitConfig,
    n_rows: int,
    limits: UploadLimits,
    kind: str = DatasetKind.PROMPTS,
) -> Iterator[tuple[int, str, RowData]]:
    """Pass 2 over a file pass 1 found valid: (index, split, row) for every row."""
    eval_set = set(eval_indices(n_rows, split.eval_ratio, split.seed)) if split.method == "ratio" else set()
    with path.open("rb") as handle:
        for index, (where, row, chosen) in enumerate(_records(handle, fmt, split, limits, kind)):
            if isinstance(row, list):  # the file changed between the passes
                raise FileError(f"{where}: the file changed while it was being stored")
            yield index, (EVAL if index in eval_set else chosen), row
