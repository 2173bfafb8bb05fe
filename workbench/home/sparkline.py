"""A sparkline as inline SVG geometry, computed on the server (no script, no style attribute)."""

from __future__ import annotations

from dataclasses import dataclass

WIDTH, HEIGHT, PAD = 120, 28, 2


@dataclass(frozen=True)
class Sparkline:
    points: str  # an SVG polyline's "x,y x,y ..." in a WIDTH x HEIGHT box
    last_x: float
    last_y: float
    count: int
    first_step: int
    last_step: int
    last: float
    low: float
    high: float


def sparkline(series: list[tuple[int, float]]) -> Sparkline | None:
    """Scale (step, value) points into the box: steps across, values up (a flat series sits mid-height)."""
    if not series:
        return None
    steps, values = [step for step, _ in series], [value for _, value in series]
    first, last, low, high = steps[0], steps[-1], min(values), max(values)

    def x(step: int) -> float:
        return PAD + (step - first) / (last - first) * (WIDTH - 2 * PAD) if last > first else WIDTH / 2

    def y(value: float) -> float:
        return HEIGHT - PAD - (value - low) / (high - low) * (HEIGHT - 2 * PAD) if high > low else HEIGHT / 2

    points = " ".join(f"{x(step):.1f},{y(value):.1f}" for step, value in series)
    return Sparkline(points, x(last), y(values[-1]), len(series), first, last, values[-1], low, high)
