"""Search over a local corpus with BM25 (the bm25s library); a small demo corpus ships in trainers/data."""

from __future__ import annotations

import json
import threading
from pathlib import Path
from typing import Any

from trainers.tools.base import TOOLS, Tool, ToolOutput

DEMO_CORPUS = Path(__file__).resolve().parents[1] / "data" / "demo_corpus.jsonl"
_indexes: dict[tuple[str, float], BM25Index] = {}
_lock = threading.Lock()


class BM25Index:
    """A JSONL corpus (one {"id", "title", "text"} per line) indexed once and shared by all trajectories."""

    def __init__(self, path: Path) -> None:
        import bm25s

        self.docs = [json.loads(line) for line in path.read_text().splitlines() if line.strip()]
        if not self.docs:
            raise ValueError(f"corpus {path} is empty")
        self._bm25s = bm25s
        self.retriever = bm25s.BM25()
        self.retriever.index(
            bm25s.tokenize([self._text(d) for d in self.docs], stopwords="en", show_progress=False),
            show_progress=False,
        )

    @staticmethod
    def _text(doc: dict[str, Any]) -> str:
        return f"{doc.get('title', '')}\n{doc.get('text', '')}"

    def search(self, query: str, k: int) -> list[tuple[dict[str, Any], float]]:
        tokens = self._bm25s.tokenize([query], stopwords="en", show_progress=False)
        if not tokens.vocab:
            return []
        k = min(k, len(self.docs))
        ids, scores = self.retriever.retrieve(tokens, k=k, show_progress=False)
        return [(self.docs[int(i)], float(s)) for i, s in zip(ids[0], scores[0], strict=True) if s > 0]


def load_index(path: str | Path) -> BM25Index:
    """Indexes are cached per (path, modification time)."""
    path = Path(path)
    key = (str(path.resolve()), path.stat().st_mtime)
    with _lock:
        if key not in _indexes:
            _indexes[key] = BM25Index(path)
        return _indexes[key]


@TOOLS.register("search")
class Search(Tool):
    name = "search"
    description = "Search the knowledge base and return the most relevant passages."
    parameters = {
        "type": "object",
        "properties": {
            "query": {"type": "string", "minLength": 1},
            "top_k": {"type": "integer", "minimum": 1, "maximum": 10},
        },
        "required": ["query"],
        "additionalProperties": False,
    }

    def __init__(
        self,
        *,
        timeout_s: float | None = None,
        corpus_path: str | None = None,
        top_k: int = 3,
        max_chars: int = 300,
    ) -> None:
        super().__init__(timeout_s=timeout_s)
        self.index = load_index(corpus_path or DEMO_CORPUS)
        self.top_k, self.max_chars = top_k, max_chars

    async def run(self, arguments: dict[str, Any]) -> ToolOutput:
        hits = self.index.search(arguments["query"], arguments.get("top_k", self.top_k))
        if not hits:
            return ToolOutput(True, "no results")
        lines = [
            f"[{n}] {doc.get('title', '')}: {doc.get('text', '')[: self.max_chars]}"
            for n, (doc, _) in enumerate(hits, 1)
        ]
        return ToolOutput(True, "\n".join(lines))
