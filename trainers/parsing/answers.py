"""Final-answer extraction: `\\boxed{}` with nested braces (the last one counts) and tag contents."""

from __future__ import annotations

import re

_BOXED = re.compile(r"\\(?:boxed|fbox)\s*\{")
_BRACE = re.compile(r"[{}]")


def extract_boxed(text: str) -> str | None:
    """The content of the last balanced `\\boxed{...}` in `text`, or None.

    One pass over the braces, so linear in the text (a scan per box was quadratic on many unclosed
    boxes): each `}` closes the latest open `{`, and of the closed boxes the one opened last counts.
    """
    openers = {match.end() - 1 for match in _BOXED.finditer(text)}  # where each box's own "{" is
    if not openers:
        return None
    stack: list[int] = []
    last: tuple[int, int] | None = None
    for brace in _BRACE.finditer(text, min(openers)):
        if brace.group() == "{":
            stack.append(brace.start())
        elif stack:
            start = stack.pop()
            if start in openers and (last is None or start > last[0]):
                last = (start, brace.start())
    return None if last is None else text[last[0] + 1 : last[1]].strip()


def extract_all_tags(text: str, tag: str) -> list[str]:
    """Every complete `<tag>...</tag>` content, in order."""
    pattern = rf"<{re.escape(tag)}>(.*?)</{re.escape(tag)}>"
    return [m.strip() for m in re.findall(pattern, text, flags=re.DOTALL)]


def extract_tag(text: str, tag: str) -> str | None:
    """The content of the last complete `<tag>...</tag>` in `text`, or None."""
    matches = extract_all_tags(text, tag)
    return matches[-1] if matches else None
