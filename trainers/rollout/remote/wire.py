"""What travels between the trainer and its rollout workers: jobs, results, the rollout spec."""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from typing import Any

from trainers.config.sampling import SamplingParams

WEIGHTS_PREFIX = "weights"  # under the dispatcher's weights URL


@dataclass
class RolloutJob:
    """One chunk of a step's rows (whole groups) and what a worker needs to roll them out; JSON-able."""

    job_id: str
    run_key: str  # the run (and config) whose policy the worker keeps loaded
    weights_url: str  # the artifact store holding `<weights_prefix>/v{version:06d}`
    weights_prefix: str
    weight_version: int
    rows: list[dict]
    samples_per_prompt: int
    seed: int | None
    spec: dict[str, Any]  # template, prompt source, tool bindings, limits, sampling, device

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> RolloutJob:
        return cls(**data)


@dataclass
class JobResult:
    """A job's finished trajectories (as dicts, rewards not computed yet) and where they came from."""

    job_id: str
    trajectories: list[dict]
    worker: str
    weight_version: int
    seconds: float = 0.0  # the job on its worker, weight loading included
    load_s: float = 0.0  # of which loading a weight version
    generate_s: float = 0.0
    batches: int = 0
    requests: int = 0
    arrived: float = field(default=0.0, compare=False)  # the dispatcher's clock when the result came

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> JobResult:
        return cls(**data)


class JobFailed(Exception):
    """A job raised on its worker; the dispatcher sends it again (up to its attempt limit)."""


def rollout_spec(
    template: str, prompt_source: str | None, tools: list[dict], limits: Any, sampling: SamplingParams,
    device: str = "cpu", generation: dict[str, Any] | None = None,
) -> dict[str, Any]:  # fmt: skip
    """What a worker needs besides the weights to roll out exactly as the trainer's engine would;
    `generation` (the config's section) only when it is not the HF backend."""
    spec = {
        "template": template,
        "prompt_source": prompt_source,
        "tools": [binding if isinstance(binding, str) else dict(binding) for binding in tools],
        "limits": limits.model_dump(),
        "sampling": sampling.model_dump(),
        "device": device,
    }
    if generation is not None and generation.get("backend", "hf") != "hf":
        spec["generation"] = dict(generation)
    return spec
