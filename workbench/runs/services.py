"""Writes on runs from the browser: create (validate + snapshot + pin), launch, cancel, edit metadata.

The config snapshot is written once here and never updated; the worker reads it by run id.
"""

from __future__ import annotations

import copy
import uuid
from collections.abc import Callable, Iterable, Sequence
from typing import Any

from django.core.exceptions import ValidationError
from django.db import transaction
from django.utils import timezone

from trainers.workbench_api import ConfigError, validate_config
from workbench.accounts.access import require_role, team_id_of
from workbench.accounts.models import Role
from workbench.jobs.cores import cpu_ranks, ranks_launch_error
from workbench.jobs.gpus import gpu_launch_error
from workbench.jobs.queues import QUEUE_NAMES
from workbench.jobs.selectors import workers_online
from workbench.toolschemas.mcp import mcp_launch_errors

from .config.bounds import OutOfBounds, run_config_bound
from .config.requirements import run_requirements_errors
from .models import Run, RunStatus, Tag


def run_config_compose(
    *,
    base: dict[str, Any],
    dataset_version=None,
    prompt_version=None,
    reward_version=None,
    tool_versions: Sequence = (),
    sft_dataset_version=None,
    agent_version=None,
) -> dict[str, Any]:
    """The config with the pinned catalog versions written into the sections they define (an agent
    program's source into rollout.agent, beside the limits the config gives it). Pinned data files are
    written by the worker (its run directory), so the snapshot names no path for them."""
    config = copy.deepcopy(base)
    if sft_dataset_version is not None and isinstance(config.get("sft"), dict):
        config["sft"] = {**config["sft"], "data_path": None}
    if prompt_version is not None:
        config["template"] = {"name": prompt_version.family, "source": prompt_version.source or None}
    if reward_version is not None:
        config["reward"] = copy.deepcopy(reward_version.definition)
    if tool_versions:
        config["tools"] = [version.binding() for version in tool_versions]
    if agent_version is not None:
        rollout = config.get("rollout") if isinstance(config.get("rollout"), dict) else {}
        agent = rollout.get("agent") if isinstance(rollout.get("agent"), dict) else {}
        config["rollout"] = {**rollout, "agent": {**agent, "program": None, "source": agent_version.source}}
    return config


def run_config_validate(config: Any) -> dict[str, Any]:
    """The normalised snapshot (defaults filled in), or a ValidationError keyed by config path."""
    try:
        return validate_config(config).model_dump(mode="json")
    except ConfigError as exc:
        errors: dict[str, list[str]] = {}
        for path, message in exc.errors:
            errors.setdefault(path or "config", []).append(message)
        raise ValidationError(errors) from None


def run_config_check_bounds(team, snapshot: dict[str, Any]) -> None:
    """The operator's bounds (sandbox limits, network, model and data paths), errors keyed by path."""
    try:
        run_config_bound(snapshot, team_id=team.pk)
    except OutOfBounds as exc:
        raise ValidationError(exc.errors) from None


def _without(config: dict[str, Any], path: str) -> bool:
    """Drop the value at a dotted `path` (or the list holding it), so that it takes its default; False
    when the config has no such key."""
    *parents, leaf = path.split(".")
    node: Any = config
    for part in parents:
        if not isinstance(node, dict) or part not in node:
            return False
        if not isinstance(node[part], dict):
            leaf = part
            break
        node = node[part]
    if not isinstance(node, dict) or leaf not in node:
        return False
    del node[leaf]
    return True


def run_config_normalise(config: dict[str, Any]) -> tuple[dict[str, Any] | None, dict[str, list[str]]]:
    """(The normalised snapshot, the trainers validation's errors by config path.) An invalid value takes
    its default in the snapshot, so that the later checks still see the rest of the config; the snapshot
    is None when the config cannot be repaired that way (an error of the whole config)."""
    try:
        return run_config_validate(config), {}
    except ValidationError as exc:
        errors = exc.message_dict
    repaired = copy.deepcopy(config)
    if not all(_without(repaired, path) for path in errors):
        return None, errors
    try:
        return run_config_validate(repaired), errors
    except ValidationError:
        return None, errors


class _Errors(dict[str, list[str]]):
    """Errors by field, gathered from checks that raise ValidationError, so that one pass finds all. The
    later checks saw a default in place of each value in `defaulted`: they add nothing at its path."""

    def __init__(self) -> None:
        super().__init__()
        self.defaulted: set[str] = set()

    def collect(self, check: Callable[..., None], *args: Any, **kwargs: Any) -> None:
        try:
            check(*args, **kwargs)
        except ValidationError as exc:
            self.add(exc.message_dict)

    def add(self, errors: dict[str, list[str]]) -> None:
        for path, messages in errors.items():
            if path not in self.defaulted:
                self.setdefault(path, []).extend(messages)


def _check_queue(queue: str) -> None:
    if queue not in QUEUE_NAMES:
        raise ValidationError({"queue": [f"Unknown queue {queue!r}; one of {', '.join(QUEUE_NAMES)}."]})


def run_create_check(
    *,
    team,
    config: dict[str, Any],
    queue: str,
    dataset_version=None,
    prompt_version=None,
    reward_version=None,
    tool_versions: Sequence = (),
    sft_dataset_version=None,
    agent_version=None,
    launch: bool = True,
) -> tuple[dict[str, Any] | None, dict[str, list[str]]]:
    """(The snapshot run_create would store, every reason it would refuse the run by field.) One pass:
    the queue, the trainers validation, the operator's bounds, what the pins must provide and (to
    launch) the live workers are all checked, each on what the others left valid; an MCP tool's server is
    asked for its tools (is it up, does it still offer the tool with the input schema pinned at import)."""
    errors = _Errors()
    errors.collect(_check_queue, queue)
    errors.collect(
        _check_pins,
        team,
        [dataset_version, sft_dataset_version, prompt_version, reward_version, agent_version, *tool_versions],
    )
    composed = run_config_compose(
        base=config,
        dataset_version=dataset_version,
        prompt_version=prompt_version,
        reward_version=reward_version,
        tool_versions=tool_versions,
        sft_dataset_version=sft_dataset_version,
        agent_version=agent_version,
    )
    snapshot, invalid = run_config_normalise(composed)
    errors.add(invalid)
    errors.defaulted = set(invalid)
    errors.collect(run_config_check_bounds, team, snapshot or composed)
    if snapshot is None:
        return None, dict(errors)
    errors.collect(run_mcp_check, team, snapshot["tools"], tool_versions)
    typed = validate_config(snapshot)
    errors.add(
        run_requirements_errors(
            typed,
            dataset_version=dataset_version,
            sft_dataset_version=sft_dataset_version,
            agent_version=agent_version,
        )
    )  # what the worker would refuse a moment after it starts
    if launch and queue in QUEUE_NAMES:
        errors.collect(run_gpus_check, gpus=typed.resources.gpus, queue=queue)
        errors.collect(run_ranks_check, config=snapshot, queue=queue)
    return snapshot, dict(errors)


def run_mcp_check(team, tools: list[Any], tool_versions: Sequence) -> None:
    """Refuse MCP tools whose server is down, no longer offers them, or changed their input schema since
    import: on the pinned tool schemas' field, or on `tools` for a config's own bindings."""
    if tool_versions:
        field, labels = "tool_versions", [f"tool schema {v.item.name!r}" for v in tool_versions]
    else:
        field, labels = "tools", [f"tool {_tool_name(tool)!r}" for tool in tools]
    messages = mcp_launch_errors(team=team, tools=tools, labels=labels)
    if messages:
        raise ValidationError({field: messages})


def _tool_name(binding: Any) -> str:
    config = binding.get("config") if isinstance(binding, dict) else None
    return str((config or {}).get("name") or (config or {}).get("tool") or "")


def _check_pins(team, pins: Iterable) -> None:
    """Defence in depth behind the scoped form: every pinned version must be this team's."""
    for version in pins:
        if version is not None and team_id_of(version) != team.pk:
            raise ValidationError({"config": ["A pinned catalog version belongs to another team."]})


def _tags(team, names: Iterable[str]) -> list[Tag]:
    clean = sorted({name.strip()[:64] for name in names if name.strip()})
    return [Tag.objects.get_or_create(team=team, name=name)[0] for name in clean]


@transaction.atomic
def run_create(
    *,
    team,
    user,
    name: str,
    config: dict[str, Any],
    queue: str,
    notes: str = "",
    tags: Iterable[str] = (),
    dataset_version=None,
    prompt_version=None,
    reward_version=None,
    tool_versions: Sequence = (),
    sft_dataset_version=None,
    agent_version=None,
    cloned_from: Run | None = None,
    launch: bool = True,
) -> Run:
    """Validate the composed config within the operator's bounds (every refusal at once, by field), store
    it as the run's immutable snapshot and (by default) launch it."""
    require_role(user=user, team=team, min_role=Role.MEMBER)
    snapshot, errors = run_create_check(
        team=team,
        config=config,
        queue=queue,
        dataset_version=dataset_version,
        prompt_version=prompt_version,
        reward_version=reward_version,
        tool_versions=tool_versions,
        sft_dataset_version=sft_dataset_version,
        agent_version=agent_version,
        launch=launch,
    )
    if errors:
        raise ValidationError(errors)
    run = Run(
        team=team,
        created_by=user,
        name=name,
        notes=notes,
        queue=queue,
        config=snapshot,
        dataset_version=dataset_version,
        sft_dataset_version=sft_dataset_version,
        prompt_version=prompt_version,
        reward_version=reward_version,
        agent_version=agent_version,
        cloned_from=cloned_from,
    )
    run.full_clean()
    run.save()
    run.tool_versions.set(tool_versions)
    run.tags.set(_tags(team, tags))
    if launch:
        run_launch(run=run)
    return run


def run_gpus_check(*, gpus: int, queue: str) -> None:
    """Refuse a GPU request no live worker on the queue can meet (it would wait in the queue for ever).
    With no live worker on the queue at all the run is accepted and waits; its page says why."""
    error = gpu_launch_error(gpus=gpus, queue=queue, workers=workers_online())
    if error:
        raise ValidationError({"resources.gpus": [error]})


def run_ranks_check(*, config: dict[str, Any], queue: str) -> None:
    """Refuse a CPU DeepSpeed run with more ranks (processes) than any live worker on the queue has cores."""
    ranks = cpu_ranks(config)
    error = None if ranks is None else ranks_launch_error(ranks=ranks, queue=queue, workers=workers_online())
    if error:
        raise ValidationError({"training.deepspeed.ranks": [error]})


def run_launch(*, run: Run) -> None:
    """Enqueue the training task on the run's queue once the row is committed; the id is known up front."""
    from .tasks import train_run

    run.celery_task_id = uuid.uuid4().hex
    run.save(update_fields=["celery_task_id"])
    transaction.on_commit(
        lambda: train_run.apply_async(args=[run.pk], queue=run.queue, task_id=run.celery_task_id)
    )


@transaction.atomic
def run_cancel(*, run: Run, user) -> Run:
    """A queued run is cancelled at once; a running one is asked to stop (the worker polls the flag)."""
    require_role(user=user, team=run.team_id, min_role=Role.MEMBER)
    run = Run.objects.select_for_update().get(pk=run.pk)
    if run.is_finished:
        return run
    run.cancel_requested = True
    fields = ["cancel_requested"]
    if run.status == RunStatus.QUEUED:
        run.status, run.finished_at = RunStatus.CANCELLED, timezone.now()
        fields += ["status", "finished_at"]
    run.save(update_fields=fields)
    return run


@transaction.atomic
def run_update(*, run: Run, user, name: str, notes: str, tags: Iterable[str], is_baseline: bool) -> Run:
    """Edit what describes a run for the team; the config snapshot is deliberately not a parameter."""
    require_role(user=user, team=run.team_id, min_role=Role.MEMBER)
    run.name, run.notes, run.is_baseline = name, notes, is_baseline
    run.full_clean()
    run.save(update_fields=["name", "notes", "is_baseline"])
    run.tags.set(_tags(run.team, tags))
    return run


def run_clone_initial(*, run: Run) -> dict[str, Any]:
    """Initial data for a new run that starts as a copy of this one."""
    return {
        "name": f"{run.name} (copy)",
        "queue": run.queue,
        "notes": run.notes,
        "tags": ", ".join(run.tags.values_list("name", flat=True)),
        "config": copy.deepcopy(run.config),
        "dataset_version": run.dataset_version_id,
        "sft_dataset_version": run.sft_dataset_version_id,
        "prompt_version": run.prompt_version_id,
        "reward_version": run.reward_version_id,
        "tool_versions": list(run.tool_versions.values_list("pk", flat=True)),
        "agent_version": run.agent_version_id,
    }
