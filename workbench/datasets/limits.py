"""The limits an uploaded dataset must keep (settings, overridable from the environment) and how they read."""

from __future__ import annotations

from dataclasses import dataclass

from django.conf import settings


@dataclass(frozen=True)
class UploadLimits:
    """Bounds on an upload: the file, each row and the values in it, and what a compressed file expands to."""

    max_upload_bytes: int
    max_columns: int
    max_row_bytes: int
    max_expanded_bytes: int
    max_depth: int
    max_int_digits: int

    @classmethod
    def from_settings(cls) -> UploadLimits:
        return cls(
            max_upload_bytes=settings.DATASET_MAX_UPLOAD_BYTES,
            max_columns=settings.DATASET_MAX_COLUMNS,
            max_row_bytes=settings.DATASET_MAX_ROW_BYTES,
            max_expanded_bytes=settings.DATASET_MAX_EXPANDED_BYTES,
            max_depth=settings.DATASET_MAX_NESTING_DEPTH,
            max_int_digits=settings.DATASET_MAX_INTEGER_DIGITS,
        )


def size_text(n_bytes: int) -> str:
    """A byte count as users read limits: '256.0 MB', '1.5 kB', '100 bytes'."""
    if n_bytes >= 1_000_000:
        return f"{n_bytes / 1e6:.1f} MB"
    return f"{n_bytes / 1e3:.1f} kB" if n_bytes >= 1000 else f"{n_bytes} bytes"
