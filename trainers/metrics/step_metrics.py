"""Per-step rollout statistics of a batch of scored trajectories (keys in `trainers.metrics.keys`)."""

from __future__ import annotations

import statistics
from collections.abc import Iterable, Sequence

from trainers.metrics import keys
from trainers.trajectory import ToolResult, Trajectory

TRUNCATION_REASONS = ("length", "token_budget")  # the rollout's finish reasons for a cut-off response


def _mean(values: Iterable[float]) -> float:
    values = list(values)
    return sum(values) / len(values) if values else 0.0


def reward_metrics(trajectories: Sequence[Trajectory]) -> dict[str, float]:
    """Mean/std of rewards, mean within-group std (sample std), share of zero-variance groups, components."""
    rewards = [t.reward for t in trajectories]
    groups: dict[str, list[float]] = {}
    for t in trajectories:
        groups.setdefault(t.group_id, []).append(t.reward)
    group_stds = [statistics.stdev(g) if len(g) > 1 else 0.0 for g in groups.values()]
    out = {
        keys.REWARD_MEAN: _mean(rewards),
        keys.REWARD_STD: statistics.pstdev(rewards) if rewards else 0.0,
        keys.REWARD_GROUP_STD_MEAN: _mean(group_stds),
        keys.REWARD_ZERO_VARIANCE_FRAC: _mean(float(max(g) == min(g)) for g in groups.values()),
    }
    components = sorted({name for t in trajectories for name in t.rewards})
    for name in components:
        values = [t.rewards[name] for t in trajectories if name in t.rewards]
        out[keys.reward_component_key(name)] = _mean(values)
    return out


def rollout_metrics(trajectories: Sequence[Trajectory]) -> dict[str, float]:
    lengths = [t.num_policy_tokens for t in trajectories]
    return {
        keys.RESPONSE_LENGTH: _mean(lengths),
        keys.RESPONSE_LENGTH_MAX: float(max(lengths, default=0)),
        keys.TURNS: _mean(len(t.assistant_turns) for t in trajectories),
        keys.TRUNCATED_FRAC: _mean(float(t.finish_reason in TRUNCATION_REASONS) for t in trajectories),
    }


def tool_metrics(trajectories: Sequence[Trajectory]) -> dict[str, float]:
    """Calls per trajectory (all and by tool); success and parse-error rates only when there were calls.
    Success is a share of every call, malformed ones included: a step whose calls all failed to parse
    succeeded on none of them (0.0), it is not left out."""
    out = {keys.TOOL_CALLS_PER_TRAJ: _mean(t.num_tool_calls for t in trajectories)}
    by_tool: dict[str, int] = {}
    for t in trajectories:
        for name, count in t.tool_calls_by_name().items():
            by_tool[name] = by_tool.get(name, 0) + count
    for name, count in sorted(by_tool.items()):
        out[keys.tool_calls_key(name)] = count / len(trajectories)
    executed = [r for t in trajectories for r in t.tool_results if r.executed]
    calls = [c for t in trajectories for c in t.tool_calls]
    malformed = sum(c.parse_error is not None for c in calls)
    if executed or malformed:
        out[keys.TOOL_SUCCESS_RATE] = sum(r.ok for r in executed) / (len(executed) + malformed)
    if calls:
        out[keys.TOOL_PARSE_ERROR_RATE] = malformed / len(calls)
    out.update(server_error_metrics(executed))
    return out


def server_error_metrics(results: Sequence[ToolResult]) -> dict[str, float]:
    """Failed calls per external server (MCP, environment servers), all of them and the total; a series
    at 0 for every server the step called, so a chart shows when failures start."""
    by_server: dict[str, int] = {}
    for result in results:
        if result.server is not None:
            by_server[result.server] = by_server.get(result.server, 0) + result.server_error
    if not by_server:
        return {}
    out = {keys.server_errors_key(name): float(count) for name, count in sorted(by_server.items())}
    out[keys.TOOL_SERVER_ERRORS] = float(sum(by_server.values()))
    return out


def judge_metrics(trajectories: Sequence[Trajectory]) -> dict[str, float]:
    """Judge calls, errors, cache hits, tokens and request time of the step; absent without a judge. A
    groupwise call is recorded on each of its group's trajectories, its cost on the first only."""
    calls = [
        record
        for t in trajectories
        for record in t.metadata.get(keys.JUDGE_METADATA, [])
        if isinstance(record, dict) and "seconds" in record
    ]
    if not calls:
        return {}
    return {
        keys.JUDGE_CALLS: float(len(calls)),
        keys.JUDGE_ERRORS: float(sum(record.get("error") is not None for record in calls)),
        keys.JUDGE_CACHE_HITS: float(sum(bool(record.get("cached")) for record in calls)),
        keys.JUDGE_TOKENS: float(sum(record.get("tokens", 0) for record in calls)),
        keys.JUDGE_SECONDS: float(sum(record.get("seconds", 0.0) for record in calls)),
    }


def compute_step_metrics(
    trajectories: Sequence[Trajectory], *, filtered_frac: float | None = None
) -> dict[str, float]:
    """All rollout-side metrics of one step; pass the filters' `FilterResult.filtered_frac` if any ran."""
    if not trajectories:
        return {} if filtered_frac is None else {keys.FILTERED_FRAC: filtered_frac}
    out = {**reward_metrics(trajectories), **rollout_metrics(trajectories), **tool_metrics(trajectories)}
    out.update(judge_metrics(trajectories))
    if filtered_frac is not None:
        out[keys.FILTERED_FRAC] = filtered_frac
    return out
