"""Reasoning extraction: the `<think>` spans of a response."""

from __future__ import annotations

from trainers.parsing.tool_calls import tag_spans


def extract_reasoning(text: str, open_tag: str = "<think>", close_tag: str = "</think>") -> str | None:
    """All think spans joined by blank lines; text before a lone `</think>` counts (prompt opened it)."""
    parts = [body.strip() for body, _ in tag_spans(text, open_tag, close_tag)]
    if not parts and close_tag in text:
        parts = [text.split(close_tag, 1)[0].strip()]
    return "\n\n".join(parts) if parts else None
