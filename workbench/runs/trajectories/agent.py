"""What the inspector shows of an agent episode (trainers' `metadata.agent` and `metadata.failure`): how
the program ended, what `run` returned, and its stdout and stderr."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any


@dataclass(frozen=True)
class AgentEpisode:
    """One trajectory's view of its episode; `logs` is (stream name, text) for stdout then stderr."""

    failure: str | None
    episode: str
    segment: int
    requests: int
    result: Any
    status: str
    error: str
    elapsed_s: float | None
    logs: list[tuple[str, str]]


def _text(value: Any) -> str:
    return value if isinstance(value, str) else ""


def agent_episode(data: dict[str, Any]) -> AgentEpisode | None:
    """The episode of a stored trajectory (`TrajectoryRecord.data`); None for a built-in rollout's."""
    metadata = data.get("metadata") if isinstance(data.get("metadata"), dict) else {}
    agent = metadata.get("agent")
    if not isinstance(agent, dict):
        return None
    log = agent.get("log") if isinstance(agent.get("log"), dict) else {}
    elapsed = log.get("elapsed_s")
    return AgentEpisode(
        failure=_text(metadata.get("failure")) or None,
        episode=_text(agent.get("episode")),
        segment=agent.get("segment") if isinstance(agent.get("segment"), int) else 0,
        requests=agent.get("requests") if isinstance(agent.get("requests"), int) else 0,
        result=agent.get("result"),
        status=_text(log.get("status")),
        error=_text(log.get("error")),
        elapsed_s=float(elapsed) if isinstance(elapsed, int | float) else None,
        logs=[(name, _text(log.get(name))) for name in ("stdout", "stderr")],
    )
