"""What the upload readers produce: rows as read, and the problems of a row or of the whole file."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any


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
