"""BM25 search over the demo corpus and over a team's own corpus file."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path

from trainers.tools.search import DEMO_CORPUS, Search, load_index


def test_demo_corpus_ships_with_the_package() -> None:
    assert DEMO_CORPUS.exists()
    assert len(load_index(DEMO_CORPUS).docs) >= 20


def test_best_match_comes_first() -> None:
    result = asyncio.run(Search().invoke({"query": "What is the capital of France?"}))
    assert result.ok
    assert result.output.splitlines()[0].startswith("[1] Paris:")


def test_top_k_limits_the_number_of_results() -> None:
    result = asyncio.run(Search().invoke({"query": "capital city", "top_k": 2}))
    assert [line[:3] for line in result.output.splitlines()] == ["[1]", "[2]"]


def test_custom_corpus_path(tmp_path: Path) -> None:
    corpus = tmp_path / "corpus.jsonl"
    docs = [
        {"id": "a", "title": "Zebra", "text": "Zebras have black and white stripes."},
        {"id": "b", "title": "Flamingo", "text": "Flamingos are pink wading birds."},
        {"id": "c", "title": "Crow", "text": "Crows are clever black birds."},
    ]
    corpus.write_text("\n".join(json.dumps(d) for d in docs))
    result = asyncio.run(Search(corpus_path=str(corpus), top_k=1).invoke({"query": "pink birds"}))
    assert result.output == "[1] Flamingo: Flamingos are pink wading birds."


def test_query_without_known_words_gives_no_results() -> None:
    assert asyncio.run(Search().invoke({"query": "xyzzy plugh"})).output == "no results"


def test_empty_query_is_rejected_by_the_schema() -> None:
    result = asyncio.run(Search().invoke({"query": ""}))
    assert not result.ok
    assert "invalid arguments for search at query" in result.error
