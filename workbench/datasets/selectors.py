"""Reads for datasets, always scoped to the user's teams."""

from __future__ import annotations

import json
from dataclasses import dataclass

from django.db.models import QuerySet, TextField
from django.db.models.fields.json import KT, KeyTransform
from django.db.models.functions import Cast, Left
from django.http import Http404

from workbench.accounts.access import get_scoped_or_404
from workbench.accounts.models import Role, Team
from workbench.catalog.selectors import catalog_items_for
from workbench.datasets.models import Dataset, DatasetRow, DatasetUpload, DatasetVersion

PREVIEW_ROWS = 20
PREVIEW_CELL_CHARS = 300
PREVIEW_MESSAGES = 12  # messages shown of each conversation
_JSON_CELLS = ("tool_calls", "initial_state", "metadata")


def dataset_list(*, user, team: Team | None) -> QuerySet[Dataset]:
    return catalog_items_for(model=Dataset, user=user, team=team)


def dataset_get(*, user, pk, min_role: str = Role.VIEWER) -> Dataset:
    return get_scoped_or_404(Dataset, user, pk, min_role=min_role)


def dataset_version_get(*, dataset: Dataset, number: int | None) -> DatasetVersion:
    """The numbered version, or the latest when number is None; 404 when there is none."""
    versions = dataset.versions.select_related("created_by")
    version = versions.filter(number=number).first() if number else versions.order_by("-number").first()
    if version is None:
        raise Http404
    return version


def dataset_rows(*, version: DatasetVersion, split: str | None = None, limit: int = PREVIEW_ROWS) -> list:
    rows = version.rows.all()
    if split:
        rows = rows.filter(split=split)
    return list(rows[:limit])


@dataclass(frozen=True)
class RowPreview:
    """A row as pages show it: each cell at most PREVIEW_CELL_CHARS characters, JSON cells as text."""

    index: int
    split: str
    prompt: str
    answer: str
    tool_calls: str
    initial_state: str
    metadata: str


def dataset_row_previews(
    *, version: DatasetVersion, split: str | None = None, limit: int = PREVIEW_ROWS
) -> list[RowPreview]:
    """The first rows, each cell cut in the database: however wide a stored row is (long texts, many
    metadata keys), a page reads a few hundred characters of it."""
    rows = version.rows.all()
    if split:
        rows = rows.filter(split=split)
    cut = PREVIEW_CELL_CHARS + 1  # one more, to tell a cut cell from one that fits
    cells = rows.values("index", "split").annotate(
        prompt_cut=Left("prompt", cut),
        answer_cut=Left("answer", cut),
        **{f"{name}_cut": Left(Cast(name, TextField()), cut) for name in _JSON_CELLS},
    )[:limit]
    return [
        RowPreview(
            index=row["index"],
            split=row["split"],
            prompt=_shortened(row["prompt_cut"]),
            answer=_shortened(row["answer_cut"]),
            **{name: _json_cell(row[f"{name}_cut"]) for name in _JSON_CELLS},
        )
        for row in cells
    ]


@dataclass(frozen=True)
class MessagePreview:
    """One message of a conversation as the preview shows it: text cut like any preview cell."""

    role: str
    name: str
    content: str
    tool_calls: str

    @property
    def trained(self) -> bool:
        """SFT trains on assistant messages only (their tokens have loss mask 1)."""
        return self.role == "assistant"


@dataclass(frozen=True)
class ConversationPreview:
    index: int
    split: str
    answer: str
    messages: list[MessagePreview]
    more: bool  # messages follow past PREVIEW_MESSAGES


def _message_cells(i: int, cut: int) -> dict:
    """Columns of message `i`: role, name, its content and calls cut in the database."""
    calls = KeyTransform("tool_calls", KeyTransform(str(i), "messages"))
    return {
        f"m{i}_role": KT(f"messages__{i}__role"),
        f"m{i}_name": KT(f"messages__{i}__name"),
        f"m{i}_content": Left(KT(f"messages__{i}__content"), cut),
        f"m{i}_calls": Left(Cast(calls, TextField()), cut),
    }


def conversation_previews(
    *, version: DatasetVersion, split: str | None = None, limit: int = PREVIEW_ROWS
) -> list[ConversationPreview]:
    """The first conversations turn by turn: their first PREVIEW_MESSAGES messages, each cut in the
    database like a preview cell, so a page reads the same few kilobytes however long they are."""
    rows = version.rows.all()
    if split:
        rows = rows.filter(split=split)
    cut = PREVIEW_CELL_CHARS + 1
    cells = {key: value for i in range(PREVIEW_MESSAGES) for key, value in _message_cells(i, cut).items()}
    more = KT(f"messages__{PREVIEW_MESSAGES}__role")
    values = rows.values("index", "split").annotate(answer_cut=Left("answer", cut), more=more, **cells)[
        :limit
    ]
    return [
        ConversationPreview(
            index=row["index"],
            split=row["split"],
            answer=_shortened(row["answer_cut"]),
            messages=[
                MessagePreview(
                    role=row[f"m{i}_role"],
                    name=row[f"m{i}_name"] or "",
                    content=_shortened(row[f"m{i}_content"]),
                    tool_calls=_json_cell(row[f"m{i}_calls"]),
                )
                for i in range(PREVIEW_MESSAGES)
                if row[f"m{i}_role"] is not None
            ],
            more=row["more"] is not None,
        )
        for row in values
    ]


def _shortened(text: str | None) -> str:
    if text is None:
        return ""
    return text if len(text) <= PREVIEW_CELL_CHARS else text[: PREVIEW_CELL_CHARS - 1] + "…"


def _json_cell(text: str | None) -> str:
    """Indented JSON when the whole value fits, else its start; empty for null and {}."""
    if text is None or text in ("null", "{}"):
        return ""
    if len(text) > PREVIEW_CELL_CHARS:
        return _shortened(text)
    return json.dumps(json.loads(text), indent=2, ensure_ascii=False, sort_keys=True)


def dataset_row_at(*, version: DatasetVersion, index: int) -> DatasetRow | None:
    """Row `index` of a version the caller already scoped (e.g. a team-scoped form choice); None if absent."""
    return version.rows.filter(index=index).first()


def dataset_upload_get(*, user, pk) -> DatasetUpload:
    return get_scoped_or_404(DatasetUpload.objects.select_related("job", "version__item"), user, pk)
