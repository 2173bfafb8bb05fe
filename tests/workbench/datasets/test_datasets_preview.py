"""A wide stored dataset does not make pages heavy: previews are cut in the database, and dataset choices
on other pages never read a version's statistics."""

import json

from django.db import connection
from django.test.utils import CaptureQueriesContext

from workbench.datasets import selectors, services
from workbench.datasets.forms import DatasetVersionChoice


def _store(team, member, upload_file, name: str, width: int):
    """20 rows with a `width`-character answer, tool call argument and metadata values (within the limits)."""
    rows = [
        {
            "question": f"q{i}",
            "answer": "a" * width,
            "tool_calls": [{"name": "search", "arguments": {"query": "b" * width}}],
            "metadata": {f"k{j}": "c" * (width // 100) for j in range(100)},
        }
        for i in range(20)
    ]
    file = upload_file(f"{name}.jsonl", "".join(json.dumps(r) + "\n" for r in rows))
    upload = services.dataset_upload_create(team=team, user=member, name=name, file=file, process_now=True)
    assert upload.version is not None, upload.errors
    return upload.version


def test_the_detail_page_weighs_the_same_for_rows_ten_times_wider(client_for, team, member, upload_file):
    client = client_for(member)
    narrow = _store(team, member, upload_file, "narrow", width=20_000)
    wide = _store(team, member, upload_file, "wide", width=200_000)
    pages = [client.get(v.item.get_absolute_url()).content for v in (narrow, wide)]
    partials = [client.get(f"/datasets/{v.item.pk}/v/1/rows/").content for v in (narrow, wide)]
    # 20 rows of 600 kB (12 MB) weigh what rows of 60 kB do: cut cells differ only in how many quotes
    # (escaped as &quot;) fall within the cut.
    assert len(pages[1]) < 1.05 * len(pages[0]) and len(pages[1]) < 200_000
    assert len(partials[1]) < 1.05 * len(partials[0]) and "long cells are cut" in partials[1].decode()


def test_preview_cells_are_cut_in_the_query(team, member, upload_file):
    version = _store(team, member, upload_file, "wide", width=200_000)
    with CaptureQueriesContext(connection) as queries:
        rows = selectors.dataset_row_previews(version=version, split=None)
    assert len(rows) == 20 and len(queries) == 1
    assert 'LEFT(("datasets_datasetrow"."metadata")::text, 301)' in queries[0]["sql"]
    first = rows[0]
    assert first.prompt == "q0" and len(first.answer) == 300 and first.answer.endswith("…")
    assert len(first.tool_calls) == 300 and len(first.metadata) == 300 and first.initial_state == ""


def test_a_short_json_cell_is_shown_whole_and_indented(team, member, upload_file):
    line = {"question": "q", "tool_calls": [{"name": "calc", "arguments": {"x": 1}}], "initial_state": [0]}
    file = upload_file("d.jsonl", json.dumps(line) + "\n")
    version = services.dataset_upload_create(
        team=team, user=member, name="d", file=file, process_now=True
    ).version
    row = selectors.dataset_row_previews(version=version)[0]
    assert row.tool_calls == json.dumps(line["tool_calls"], indent=2, sort_keys=True)
    assert row.initial_state == "[\n  0\n]" and row.metadata == "" and row.answer == ""


def test_dataset_choices_do_not_read_statistics(team, member, upload_file):
    _store(team, member, upload_file, "wide", width=2_000)
    with CaptureQueriesContext(connection) as queries:
        labels = [label for _, label in DatasetVersionChoice().choices]
    assert labels[1:] == ["wide v1 (20 rows)"]
    assert queries and not any('"statistics"' in q["sql"] for q in queries)
