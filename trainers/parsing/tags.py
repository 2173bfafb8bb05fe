"""Tag scanning for format checks: which tags appear, in what order, and whether each one closes."""

from __future__ import annotations

import re
from dataclasses import dataclass

_BOXED = re.compile(r"\\(?:boxed|fbox)\s*\{")


@dataclass
class TagScan:
    """Opening tags in order of appearance (boxed answers as `boxed_as`) and whether all were closed."""

    tags: list[str]
    well_formed: bool


def scan_tags(text: str, names: list[str], *, boxed_as: str | None = None) -> TagScan:
    """Find `<name>` ... `</name>` spans, flat (no nesting), and optionally `\\boxed{` as a tag."""
    if not names:
        events: list[tuple[int, str, bool]] = []
    else:
        pattern = re.compile(r"<(/?)(" + "|".join(re.escape(n) for n in names) + r")>")
        events = [(m.start(), m.group(2), m.group(1) == "/") for m in pattern.finditer(text)]
    if boxed_as is not None:
        events += [(m.start(), boxed_as, False) for m in _BOXED.finditer(text)]
        events.sort(key=lambda e: e[0])
    tags: list[str] = []
    open_tag: str | None = None
    ok = True
    for _, name, closing in events:
        if name == boxed_as and not closing:
            tags.append(name)
        elif closing:
            ok = ok and open_tag == name
            open_tag = None
        else:
            ok = ok and open_tag is None
            open_tag = name
            tags.append(name)
    return TagScan(tags, ok and open_tag is None)


def tags_match(tags: list[str], pattern: str) -> bool:
    """Whether the space-joined tag sequence (each followed by a space) matches a regex grammar."""
    return re.fullmatch(pattern, "".join(t + " " for t in tags)) is not None
