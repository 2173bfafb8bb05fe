"""What the policy sees of a tool result: ToRL's last traceback line or the full error, truncated."""

from __future__ import annotations

from dataclasses import replace

from trainers.config.limits import RolloutLimits
from trainers.trajectory import ToolResult


def truncate_middle(text: str, max_chars: int) -> str:
    """Keep the head and the tail (where errors and results usually are) with a marker between."""
    if len(text) <= max_chars:
        return text
    cut = len(text) - max_chars
    while True:  # the marker's own length depends on the number it reports
        marker = f"\n...[{cut} characters truncated]...\n"
        new_cut = len(text) - max(max_chars - len(marker), 0)
        if new_cut == cut:
            break
        cut = new_cut
    keep = len(text) - cut
    head = (keep + 1) // 2
    return text[:head] + marker + text[len(text) - (keep - head) :]


def last_error_line(error: str) -> str:
    """The last non-empty line: for a Python traceback, e.g. `NameError: name 'a' is not defined` (ToRL)."""
    lines = [line for line in error.strip().splitlines() if line.strip()]
    return lines[-1].strip() if lines else error


def observation(result: ToolResult, limits: RolloutLimits) -> ToolResult:
    """The result with `output` replaced by what the policy sees; `error` keeps the full message."""
    text = result.output
    if not result.ok:
        message = result.error or result.output
        text = last_error_line(message) if limits.tool_error_style == "last_line" else message
    # print() output ends in a newline; the templates add their own around the observation
    return replace(result, output=truncate_middle(text.rstrip("\n"), limits.max_tool_response_chars))
