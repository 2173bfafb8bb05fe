"""Tag-structure checks for rewards that define their own format rule (ToolRL, Tool-N1, ARTIST, format)."""

from __future__ import annotations

import re
from collections.abc import Sequence

_OPEN = re.compile(r"<([A-Za-z_][\w\-]*)>")
_SPECIAL = re.compile(r"<\|[^|<>]*\|>|</s>")  # chat special tokens (<|im_end|>, <|eot_id|>, </s>)


def strip_special(text: str) -> str:
    """The text without chat special tokens: the policy may sample its turn's end-of-turn token."""
    return _SPECIAL.sub("", text)


def tags_in_order(text: str, tags: Sequence[str]) -> bool:
    """Every `<tag>...</tag>` is present, each opening after the previous one closed."""
    pos = 0
    for tag in tags:
        start = text.find(f"<{tag}>", pos)
        if start < 0:
            return False
        end = text.find(f"</{tag}>", start + len(tag) + 2)
        if end < 0:
            return False
        pos = end + len(tag) + 3
    return True


def exact_blocks(text: str, tags: Sequence[str], repeatable: Sequence[str] = ()) -> bool:
    """The text is exactly these tag blocks in this order, separated by whitespace only.

    Each tag appears once, except tags in `repeatable`, which may form a run of consecutive blocks
    (several calls of one turn, each in its own block).
    """
    parts = []
    for tag in tags:
        block = f"<{tag}>.*?</{tag}>"
        parts.append(rf"(?:{block}\s*)+" if tag in repeatable else rf"{block}\s*")
    text = strip_special(text)
    if not re.fullmatch(r"\s*" + "".join(parts), text, flags=re.DOTALL):
        return False
    # non-greedy blocks could still swallow a stray duplicate tag; counts rule that out
    return all(text.count(f"<{t}>") == 1 and text.count(f"</{t}>") == 1 for t in tags if t not in repeatable)


def opening_tags(text: str, known: Sequence[str]) -> list[str]:
    """The sequence of opening tags among `known`, in order of appearance."""
    wanted = set(known)
    return [m.group(1) for m in _OPEN.finditer(text) if m.group(1) in wanted]
