"""Operator bounds on a run config: a team chooses its run, the operator bounds what it may use.

A run launched from the workbench may use (settings are named after their environment variables):
- python-tool sandbox limits up to WORKBENCH_SANDBOX_MAX_* (a limit the config leaves at a default
  above the maximum is clamped to it), and the host network only with WORKBENCH_SANDBOX_ALLOW_NETWORK;
- no python-tool `limits.preload` but modules in WORKBENCH_SANDBOX_PRELOAD (the sandbox's parent imports
  them before the call's namespaces and privilege drop: what it imports is the operator's choice);
- a calculator tool's max_bits and max_depth up to WORKBENCH_CALCULATOR_MAX_BITS / _MAX_DEPTH (a default
  above the maximum is lowered to it);
- an agent program's episodes (rollout.agent) within WORKBENCH_AGENT_MAX_WALL_S / _MEMORY_MB /
  _CONCURRENCY / _CONTEXT_TOKENS (the validated config holds every limit, defaults included: each is
  checked), and its `program` a file under WORKBENCH_DATA_ROOTS (the workbench inlines a pinned program
  as `source`);
- at most WORKBENCH_MAX_ROLLOUTS_PER_STEP rollouts a step (rollout.prompts_per_step x samples_per_prompt:
  the trajectories generated, scored and held for one update);
- at most WORKBENCH_MAX_RANKS DeepSpeed ranks (processes on one worker; a CPU run's must also fit the
  worker's cores, workbench/jobs/cores.py);
- model.device cuda with jobs on the rollout workers (rollout.backend remote, evaluation.runner jobs) only
  with WORKBENCH_ROLLOUT_CUDA (workbench/runs/config/rollout_device.py);
- the bundled "tiny" model, or a model and tokenizer under WORKBENCH_MODEL_ROOTS;
- data files (sft.data_path, data.train_path / eval_path, a tool's *_path) under WORKBENCH_DATA_ROOTS,
  or a dataset file of the run's own team (MEDIA_ROOT holds every team's uploads, so it is no root);
- MCP tools only of a server in WORKBENCH_MCP_SERVERS open to the run's team, whose name the bound tool
  carries (`team`, whatever the config said), so the tool checks it again at every call.
Paths count once resolved (symlinks and ".."), and the worker trains on the resolved paths. Checked when
a run is created and again on the worker before training; `python -m trainers` is not bounded.
"""

from __future__ import annotations

import copy
import inspect
import os
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from django.conf import settings
from pydantic import ValidationError as LimitsInvalid

from trainers.workbench_api import TOOLS, SandboxLimits
from workbench.accounts.models import Team
from workbench.datasets.models import DatasetVersion
from workbench.toolschemas.selectors import mcp_servers

from .rollout_device import rollout_cuda_allowed, rollout_cuda_refusal

SANDBOX_TOOLS = frozenset({"python"})
# sandbox limit -> the setting holding the operator's maximum
LIMIT_MAXIMA = {
    "wall_s": "WORKBENCH_SANDBOX_MAX_WALL_S",
    "cpu_s": "WORKBENCH_SANDBOX_MAX_CPU_S",
    "memory_mb": "WORKBENCH_SANDBOX_MAX_MEMORY_MB",
    "scratch_mb": "WORKBENCH_SANDBOX_MAX_SCRATCH_MB",
    "max_processes": "WORKBENCH_SANDBOX_MAX_PROCESSES",
    "max_output_bytes": "WORKBENCH_SANDBOX_MAX_OUTPUT_BYTES",
}
CALCULATOR_TOOLS = frozenset({"calculator"})
MCP_TOOLS = frozenset({"mcp"})
MCP_SERVERS = "WORKBENCH_MCP_SERVERS"
# calculator bound -> the setting holding the operator's maximum (its work grows with both)
CALCULATOR_MAXIMA = {
    "max_bits": "WORKBENCH_CALCULATOR_MAX_BITS",
    "max_depth": "WORKBENCH_CALCULATOR_MAX_DEPTH",
}
# rollout.agent limit -> the setting holding the operator's maximum
AGENT_MAXIMA = {
    "wall_s": "WORKBENCH_AGENT_MAX_WALL_S",
    "memory_mb": "WORKBENCH_AGENT_MAX_MEMORY_MB",
    "concurrency": "WORKBENCH_AGENT_MAX_CONCURRENCY",
    "max_context_tokens": "WORKBENCH_AGENT_MAX_CONTEXT_TOKENS",
}
POOL_SIZE = "WORKBENCH_SANDBOX_MAX_POOL_SIZE"  # warm sandbox workers of one python tool (`pool_size`)
NETWORK = "WORKBENCH_SANDBOX_ALLOW_NETWORK"
PRELOAD = "WORKBENCH_SANDBOX_PRELOAD"  # modules a python tool's sandbox may import before isolating
MAX_RANKS = "WORKBENCH_MAX_RANKS"  # DeepSpeed ranks of a run: processes it starts on one worker
MAX_ROLLOUTS = "WORKBENCH_MAX_ROLLOUTS_PER_STEP"  # prompts_per_step x samples_per_prompt
GROUP_PATHS = ("rollout.prompts_per_step", "rollout.samples_per_prompt")
MODEL_ROOTS, DATA_ROOTS = "WORKBENCH_MODEL_ROOTS", "WORKBENCH_DATA_ROOTS"
MODEL_PATHS = ("model.path", "model.tokenizer_path")
DATA_PATHS = ("sft.data_path", "data.train_path", "data.eval_path")
BUNDLED_MODEL = "tiny"


class OutOfBounds(ValueError):
    """A config asking for more than the operator allows; `errors` maps config path -> messages."""

    def __init__(self, errors: dict[str, list[str]]) -> None:
        self.errors = errors
        super().__init__("; ".join(f"{path}: {text}" for path, texts in errors.items() for text in texts))


def _real_roots(name: str) -> tuple[Path, ...]:
    return tuple(Path(os.path.realpath(root)) for root in getattr(settings, name) if root)


@dataclass(frozen=True)
class OperatorBounds:
    """The operator's bounds, read from settings when a config is checked."""

    maxima: dict[str, float]
    calculator_maxima: dict[str, int]
    agent_maxima: dict[str, float]
    max_pool_size: float
    allow_network: bool
    preload: frozenset[str]
    max_ranks: int
    max_rollouts: int
    model_roots: tuple[Path, ...]
    data_roots: tuple[Path, ...]
    media_root: Path

    @classmethod
    def from_settings(cls) -> OperatorBounds:
        return cls(
            maxima={limit: float(getattr(settings, name)) for limit, name in LIMIT_MAXIMA.items()},
            calculator_maxima={key: int(getattr(settings, name)) for key, name in CALCULATOR_MAXIMA.items()},
            agent_maxima={key: float(getattr(settings, name)) for key, name in AGENT_MAXIMA.items()},
            max_pool_size=float(getattr(settings, POOL_SIZE)),
            allow_network=bool(getattr(settings, NETWORK)),
            preload=frozenset(getattr(settings, PRELOAD)),
            max_ranks=int(getattr(settings, MAX_RANKS)),
            max_rollouts=int(getattr(settings, MAX_ROLLOUTS)),
            model_roots=_real_roots(MODEL_ROOTS),
            data_roots=_real_roots(DATA_ROOTS),
            media_root=Path(os.path.realpath(settings.MEDIA_ROOT)),
        )

    def help_texts(self) -> dict[str, str]:
        """One line per form field the bounds apply to (the field's dotted path or its JSON section)."""
        models = ", ".join(map(str, self.model_roots)) or "none"
        data = ", ".join(map(str, self.data_roots)) or "none"
        limits = ", ".join(f"{limit} ≤ {value:g}" for limit, value in self.maxima.items())
        network = "network allowed" if self.allow_network else "no network"
        preload = ", ".join(sorted(self.preload)) or "none"
        calculator = ", ".join(f"{key} ≤ {value}" for key, value in self.calculator_maxima.items())
        group = f"prompts_per_step × samples_per_prompt ≤ {self.max_rollouts}"
        agent = ", ".join(f"{key} ≤ {value:g}" for key, value in self.agent_maxima.items())
        return {
            **dict.fromkeys(GROUP_PATHS, f"Operator bound: {group} ({MAX_ROLLOUTS})"),
            "model.path": f"Operator bound: '{BUNDLED_MODEL}' or a directory under {models}.",
            "model.tokenizer_path": f"Operator bound: a directory under {models}.",
            "tools": f"Operator bounds on python's limits: {limits}, pool_size ≤ {self.max_pool_size:g}; "
            f"{network}; limits.preload only of {preload} ({PRELOAD}). The calculator's {calculator}. "
            f"A tool's *_path: a file under {data}. An mcp tool: a server of {MCP_SERVERS} open to the "
            "run's team.",
            "rollout.agent": f"Operator bounds: {agent} (WORKBENCH_AGENT_MAX_*); program: a file under "
            f"{data}.",
            "training.deepspeed.ranks": f"Operator bound: ≤ {self.max_ranks} ({MAX_RANKS}); on the CPU "
            "(resources.gpus 0) no more than the CPU cores of the worker that trains the run, with GPUs one "
            "rank per GPU",
            "sft": f"Operator bound: data_path is a file under {data} or a dataset file of this team.",
        }


def _get(config: dict[str, Any], path: str) -> Any:
    node: Any = config
    for part in path.split("."):
        node = node.get(part) if isinstance(node, dict) else None
    return node


def _set(config: dict[str, Any], path: str, value: Any) -> None:
    *parents, leaf = path.split(".")
    for part in parents:
        config = config[part]
    config[leaf] = value


def _under(value: Any, roots: tuple[Path, ...]) -> Path | None:
    """The real path of an absolute `value` that lies under one of `roots`; None otherwise."""
    if not isinstance(value, str) or not os.path.isabs(value):
        return None
    real = Path(os.path.realpath(value))
    return real if any(real == root or root in real.parents for root in roots) else None


def _team_dataset_file(value: Any, bounds: OperatorBounds, team_id: int) -> Path | None:
    """The real path of `value` when it is the stored file of one of the team's dataset versions."""
    real = _under(value, (bounds.media_root,))
    if real is None or real == bounds.media_root:
        return None
    name = real.relative_to(bounds.media_root).as_posix()
    return real if DatasetVersion.objects.filter(file=name, item__team_id=team_id).exists() else None


def _outside(value: Any, allowed: str) -> str:
    return f"{value!r} is outside what the operator allows: {allowed} (absolute, after symlinks and '..')"


class _Check:
    """Collects the errors of one config and rewrites its paths and limits to what the worker may use."""

    def __init__(self, config: dict[str, Any], bounds: OperatorBounds, team_id: int) -> None:
        self.config, self.bounds, self.team_id = config, bounds, team_id
        self.errors: dict[str, list[str]] = {}

    def fail(self, path: str, message: str) -> None:
        self.errors.setdefault(path, []).append(message)

    def model_path(self, path: str) -> None:
        value = _get(self.config, path)
        if value is None or (path == "model.path" and value == BUNDLED_MODEL):
            return
        real = _under(value, self.bounds.model_roots)
        if real is None:
            roots = ", ".join(map(str, self.bounds.model_roots)) or "none configured"
            self.fail(path, _outside(value, f"a directory under {MODEL_ROOTS} ({roots})"))
        else:
            _set(self.config, path, str(real))

    def data_file(self, value: Any, path: str) -> str | None:
        """The resolved path to train on; None when unset or out of bounds (an error then)."""
        if value is None:
            return None
        real = _under(value, self.bounds.data_roots) or _team_dataset_file(value, self.bounds, self.team_id)
        if real is None:
            roots = ", ".join(map(str, self.bounds.data_roots)) or "none configured"
            self.fail(path, _outside(value, f"a file under {DATA_ROOTS} ({roots}) or a dataset of this team"))
        return None if real is None else str(real)

    def tool(self, index: int, tool: Any) -> None:
        config = tool.get("config") if isinstance(tool, dict) else None
        if not isinstance(config, dict):
            return
        prefix = f"tools.{index}.config"
        for key in [k for k in config if isinstance(k, str) and k.endswith("_path")]:
            real = self.data_file(config[key], f"{prefix}.{key}")
            if real is not None:
                config[key] = real
        if tool.get("name") in SANDBOX_TOOLS:
            self.sandbox(config, prefix)
        if tool.get("name") in CALCULATOR_TOOLS:
            self.calculator(tool["name"], config, prefix)
        if tool.get("name") in MCP_TOOLS:
            self.mcp(config, prefix)

    def mcp(self, config: dict[str, Any], prefix: str) -> None:
        """The server must be the operator's and open to the run's team; the tool carries the team's name."""
        team = Team.objects.get(pk=self.team_id).name
        config["team"] = team
        try:
            servers = mcp_servers()
        except ValueError as exc:
            self.fail(f"{prefix}.server", f"the operator's MCP server list is malformed: {exc}")
            return
        name = config.get("server")
        server = servers.get(name) if isinstance(name, str) else None
        if server is None or not server.open_to(team):
            open_ = ", ".join(n for n, s in servers.items() if s.open_to(team)) or "none"
            message = f"no MCP server {name!r} is open to this team ({MCP_SERVERS}: {open_})"
            self.fail(f"{prefix}.server", message)

    def calculator(self, name: str, config: dict[str, Any], prefix: str) -> None:
        defaults = inspect.signature(TOOLS.get(name)).parameters
        for key, setting in CALCULATOR_MAXIMA.items():
            maximum, value = self.bounds.calculator_maxima[key], config.get(key)
            if key not in config:
                if defaults[key].default > maximum:
                    config[key] = maximum
            elif not isinstance(value, int) or isinstance(value, bool) or value < 1:
                self.fail(f"{prefix}.{key}", f"{key} is a positive whole number, not {value!r}")
            elif value > maximum:
                self.fail(
                    f"{prefix}.{key}", f"{value} is above the operator's maximum of {maximum} ({setting})"
                )

    def sandbox(self, config: dict[str, Any], prefix: str) -> None:
        raw = config.get("limits") or {}
        try:
            limits = SandboxLimits.model_validate(raw)
        except LimitsInvalid as exc:
            for error in exc.errors():
                self.fail(f"{prefix}.limits", f"{'.'.join(map(str, error['loc']))}: {error['msg']}")
            return
        clamped = {}
        for limit, value in limits.model_dump(include=set(LIMIT_MAXIMA)).items():
            maximum = self.bounds.maxima[limit]
            if value <= maximum:
                continue
            if limit in raw:
                message = f"{value:g} is above the operator's maximum of {maximum:g} ({LIMIT_MAXIMA[limit]})"
                self.fail(f"{prefix}.limits.{limit}", message)
            else:
                clamped[limit] = type(value)(maximum)
        if limits.network and not self.bounds.allow_network:
            self.fail(f"{prefix}.limits.network", f"the operator allows runs no network ({NETWORK} is off)")
        self.preload(limits.preload, f"{prefix}.limits.preload")
        if clamped:
            config["limits"] = {**raw, **clamped}
        self.pool_size(config.get("pool_size"), f"{prefix}.pool_size")

    def preload(self, modules: tuple[str, ...], path: str) -> None:
        """Preloaded modules run in the sandbox's parent, before isolation: only the operator's list."""
        refused = sorted(set(modules) - self.bounds.preload)
        if refused:
            allowed = ", ".join(sorted(self.bounds.preload)) or "none"
            message = (
                f"{', '.join(refused)}: the sandbox imports preloaded modules before it isolates the call, "
                f"so only the operator's may be preloaded ({PRELOAD}: {allowed})"
            )
            self.fail(path, message)

    def rollout_device(self) -> None:
        """Jobs on the rollout workers claim no GPU: no CUDA (nor vLLM) there unless the operator allows."""
        if rollout_cuda_allowed():
            return
        remote = _get(self.config, "rollout.backend") == "remote"
        evaluations = _get(self.config, "evaluation.runner") == "jobs"
        jobs = [
            what
            for what, on in (
                ("remote rollouts (rollout.backend remote)", remote),
                ("evaluation jobs (evaluation.runner jobs)", evaluations),
            )
            if on
        ]
        device = _get(self.config, "model.device")
        if jobs and isinstance(device, str) and device.startswith("cuda"):
            self.fail("model.device", rollout_cuda_refusal(device, " and ".join(jobs)))
        if remote and _get(self.config, "generation.backend") == "vllm":
            self.fail("generation.backend", rollout_cuda_refusal("vLLM", jobs[0]))

    def ranks(self) -> None:
        training = self.config.get("training") or {}
        ranks = _get(self.config, "training.deepspeed.ranks")
        if training.get("engine") == "deepspeed" and isinstance(ranks, int) and ranks > self.bounds.max_ranks:
            maximum = self.bounds.max_ranks
            message = f"{ranks} ranks (processes on one worker) are above the operator's maximum of {maximum}"
            self.fail("training.deepspeed.ranks", f"{message} ({MAX_RANKS})")

    def rollouts(self) -> None:
        """The trajectories of a step, on both fields that multiply to it (either may be the one to lower)."""
        prompts, samples = (_get(self.config, path) for path in GROUP_PATHS)
        if not all(isinstance(n, int) and not isinstance(n, bool) for n in (prompts, samples)):
            return  # a malformed value is the config validation's error
        maximum = self.bounds.max_rollouts
        if prompts * samples > maximum:
            message = (
                f"{prompts} prompts × {samples} samples = {prompts * samples} rollouts a step are above the "
                f"operator's maximum of {maximum} ({MAX_ROLLOUTS})"
            )
            for path in GROUP_PATHS:
                self.fail(path, message)

    def agent(self) -> None:
        """An agent program's episodes within the operator's maxima; a path to its program under the data
        roots (the worker reads it). A run's program is `rollout.agent`, an evaluation's `agent`."""
        for where in ("rollout.agent", "agent"):
            agent = _get(self.config, where)
            if not isinstance(agent, dict):
                continue
            real = self.data_file(agent.get("program"), f"{where}.program")
            if real is not None:
                agent["program"] = real
            for key, setting in AGENT_MAXIMA.items():
                maximum, value = self.bounds.agent_maxima[key], agent.get(key)
                if isinstance(value, int | float) and not isinstance(value, bool) and value > maximum:
                    message = f"{value:g} is above the operator's maximum of {maximum:g} ({setting})"
                    self.fail(f"{where}.{key}", message)

    def pool_size(self, value: Any, path: str) -> None:
        if value is None:
            return
        if not isinstance(value, int) or isinstance(value, bool):
            self.fail(path, "pool_size is a whole number of sandbox workers")
        elif value > self.bounds.max_pool_size:
            maximum = self.bounds.max_pool_size
            self.fail(path, f"{value} is above the operator's maximum of {maximum:g} ({POOL_SIZE})")


def run_config_bound(
    config: dict[str, Any], *, team_id: int, bounds: OperatorBounds | None = None
) -> dict[str, Any]:
    """A copy of the config with its paths resolved and defaulted sandbox limits clamped to the
    operator's maxima; raises OutOfBounds naming each value past a bound (and the bound)."""
    check = _Check(copy.deepcopy(config), bounds or OperatorBounds.from_settings(), team_id)
    for path in MODEL_PATHS:
        check.model_path(path)
    for path in DATA_PATHS:
        real = check.data_file(_get(check.config, path), path)
        if real is not None:
            _set(check.config, path, real)
    check.ranks()
    check.rollouts()
    check.rollout_device()
    check.agent()
    tools = check.config.get("tools")
    for index, tool in enumerate(tools if isinstance(tools, list) else []):
        check.tool(index, tool)
    if check.errors:
        raise OutOfBounds(check.errors)
    return check.config
