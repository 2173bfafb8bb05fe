"""Final-answer extraction: `\\boxed{}` with nested braces (the last one counts) and tag contents."""

from __future__ import annotations

import re

_BOXED = re.compile(r"\\(?:boxed|fbox)\s*\{")


def extract_boxed(text: str) -> str | None:
    """The content of the last balanced `\\boxed{...}` in `text`, or None."""
    last: str | None = None
    for match in _BOXED.finditer(text):
        depth, start = 1, match.end()
        for i in range(start, len(text)):
            if text[i] == "{":
                depth += 1
            elif text[i] == "}":
                depth -= 1
                if depth == 0:
                    last = text[start:i].strip()
                    break
    return last


def extract_all_tags(text: str, tag: str) -> list[str]:
    """Every complete `<tag>...</tag>` content, in order."""
    pattern = rf"<{re.escape(tag)}>(.*?)</{re.escape(tag)}>"
    return [m.strip() for m in re.findall(pattern, text, flags=re.DOTALL)]


def extract_tag(text: str, tag: str) -> str | None:
    """The content of the last complete `<tag>...</tag>` in `text`, or None."""
    matches = extract_all_tags(text, tag)
    return matches[-1] if matches else None
