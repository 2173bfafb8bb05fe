"""What a run config needs from its catalog pins, checked when the run is created, so that the form says
what is missing instead of the worker failing the run a moment after it starts.

Errors are keyed by the form field that fixes them: the RL dataset pin (rows of prompts, unless the
config names a data.train_path) and the SFT data pin (conversations, whenever the config has an sft
section and no sft.data_path; an SFT pin without an sft section would be ignored, so it is refused too)
and the agent program pin (only a run whose rollout.backend is agent plays episodes with one).
"""

from __future__ import annotations

from trainers.workbench_api import RunConfig
from workbench.agents.models import AgentProgramVersion
from workbench.datasets.models import DatasetKind, DatasetVersion

RL_PIN, SFT_PIN, AGENT_PIN = "dataset_version", "sft_dataset_version", "agent_version"


def _label(version: DatasetVersion) -> str:
    return f"{version.item.name} v{version.number}"


def _rl_data(config: RunConfig, version: DatasetVersion | None) -> list[str]:
    if version is None:
        return [] if config.data.train_path else ["Pin a dataset of prompts: RL trains on its rows."]
    if version.item.kind != DatasetKind.PROMPTS:
        return [f"{_label(version)} holds conversations: pin it as SFT data, and a dataset of prompts here."]
    if version.train_count == 0:
        return [f"{_label(version)} has no train rows (every row is in its eval split)."]
    return []


def _sft_data(config: RunConfig, version: DatasetVersion | None) -> list[str]:
    sft = config.sft
    if sft is None:
        if version is None:
            return []
        return ["The config has no sft section to train on this data: add one (sft: {}) or clear this pin."]
    if version is None:
        if sft.data_path:
            return []
        return ["The sft section trains on expert conversations: pin a conversations dataset."]
    if version.item.kind != DatasetKind.CONVERSATIONS:
        return [f"{_label(version)} holds prompts, not the conversations SFT trains on."]
    if version.train_count == 0:
        return [f"{_label(version)} has no train rows (every conversation is in its eval split)."]
    return []


def _agent_program(config: RunConfig, version: AgentProgramVersion | None) -> list[str]:
    if version is None or config.rollout.backend == "agent":
        return []
    return [
        f"The rollout backend is {config.rollout.backend}: set rollout.backend to agent to play each episode"
        f" with {version.item.name} v{version.number}, or clear this pin."
    ]


def run_requirements_errors(
    config: RunConfig,
    *,
    dataset_version: DatasetVersion | None,
    sft_dataset_version: DatasetVersion | None,
    agent_version: AgentProgramVersion | None = None,
) -> dict[str, list[str]]:
    """Pin field -> what it lacks, for the composed config (empty when the worker has what it needs)."""
    errors = {
        RL_PIN: _rl_data(config, dataset_version),
        SFT_PIN: _sft_data(config, sft_dataset_version),
        AGENT_PIN: _agent_program(config, agent_version),
    }
    return {field: messages for field, messages in errors.items() if messages}
