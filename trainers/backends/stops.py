"""Stop-string detection on the decoded text of sampled tokens, without re-encoding anything."""

from __future__ import annotations


class StopWatcher:
    """Keeps the tail of one row's decoded text, just long enough to see any stop string complete."""

    def __init__(self, stop_strings: list[str]) -> None:
        self.stops = [s for s in stop_strings if s]
        self.keep = max((len(s) for s in self.stops), default=1) - 1
        self.tail = ""

    def push(self, piece: str) -> str | None:
        """Add one token's text; return the stop string it completed, if any."""
        text = self.tail + piece
        for stop in self.stops:
            if stop in text:
                return stop
        self.tail = text[-self.keep :] if self.keep else ""
        return None
