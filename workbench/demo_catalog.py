"""The demo catalog `make run` seeds: arithmetic data, the calculator demo's expert conversations (SFT
data), the calculator and python tools, the survey's Qwen tool template, a correctness + format reward,
ARTIST's answer + tool-execution reward (the demo runs') and the calculator written as an agent program.
Idempotent: items that exist by name are left alone."""

from __future__ import annotations

import json
import random

from django.core.files.base import ContentFile

from trainers.workbench_api import DEMO_LEARNING_RUN, demo_agent_program, demo_expert_conversations
from workbench.accounts.models import Team
from workbench.agents.models import AgentProgram
from workbench.agents.services import agent_program_create
from workbench.datasets.models import Dataset, DatasetKind
from workbench.datasets.services import dataset_upload_create
from workbench.prompts.models import PromptTemplate
from workbench.prompts.rendering import family_source
from workbench.prompts.services import prompt_template_create
from workbench.rewards.models import RewardDefinition
from workbench.rewards.services import reward_definition_create
from workbench.toolschemas.models import ToolSchema
from workbench.toolschemas.services import ToolSchemaContent, builtin_spec, tool_schema_create

DATASET_NAME = "Arithmetic (demo)"
SFT_DATASET_NAME = "Calculator experts (demo)"
TEMPLATE_NAME = "Qwen tool (survey)"
REWARD_NAME = "Correctness + format"
TOOL_REWARD_NAME = "Answer + tool execution (ARTIST)"
AGENT_NAME = "Calculator agent (demo)"
TOOL_NAMES = ("calculator", "python")


def arithmetic_rows(n: int = 200, seed: int = 0) -> list[dict]:
    """Questions a calculator answers exactly: two operands, + - or *, integer answers."""
    rng = random.Random(seed)
    rows = []
    for i in range(n):
        a, b, op = rng.randint(2, 999), rng.randint(2, 99), rng.choice("+-*")
        answer = {"+": a + b, "-": a - b, "*": a * b}[op]
        rows.append(
            {"question": f"What is {a} {op} {b}?", "answer": str(answer), "metadata": {"id": i, "op": op}}
        )
    return rows


def _exists(model, team: Team, name: str) -> bool:
    return model.objects.filter(team=team, name=name, is_deleted=False).exists()


def _seed_datasets(team: Team, user) -> None:
    if not _exists(Dataset, team, DATASET_NAME):
        content = "".join(json.dumps(row) + "\n" for row in arithmetic_rows())
        upload = dataset_upload_create(
            team=team,
            user=user,
            name=DATASET_NAME,
            file=ContentFile(content.encode(), name="arithmetic.jsonl"),
            description="200 two-operand arithmetic questions with integer answers; 10% held out for eval.",
            process_now=True,
        )
        if upload.errors:
            raise RuntimeError(f"demo dataset is invalid: {upload.errors}")
    if not _exists(Dataset, team, SFT_DATASET_NAME):
        content = "".join(json.dumps(row) + "\n" for row in demo_expert_conversations())
        upload = dataset_upload_create(
            team=team,
            user=user,
            name=SFT_DATASET_NAME,
            kind=DatasetKind.CONVERSATIONS,
            file=ContentFile(content.encode(), name="calculator_experts.jsonl"),
            description="1000 expert conversations on arithmetic, the calculator demo's: 60% call the"
            " calculator and copy its result, the rest answer directly. The demo runs' SFT warm start; every"
            " row trains.",
            eval_ratio=0.0,
            process_now=True,
        )
        if upload.errors:
            raise RuntimeError(f"demo SFT dataset is invalid: {upload.errors}")


def _seed_rewards(team: Team, user) -> None:
    if not _exists(RewardDefinition, team, REWARD_NAME):
        components = [
            {"name": "correctness", "weight": 1.0, "params": {"mode": "math"}},
            {"name": "format", "weight": 0.5, "params": {"template": "qwen_tool"}},
        ]
        reward_definition_create(
            team=team,
            user=user,
            name=REWARD_NAME,
            components=components,
            description="1 for a correct boxed answer, plus 0.5 when the Qwen tool format is followed.",
        )
    if not _exists(RewardDefinition, team, TOOL_REWARD_NAME):
        reward_definition_create(
            team=team,
            user=user,
            name=TOOL_REWARD_NAME,
            components=DEMO_LEARNING_RUN["reward"]["components"],
            description="ARTIST's terms: 1 for a correct answer, plus the share of tool calls that ran"
            " (its format term off). A briefly trained policy earns the tool term first.",
        )


def seed_demo_catalog(*, team: Team, user) -> None:
    """Create whatever part of the demo catalog `team` lacks, as `user` (a member or admin)."""
    _seed_datasets(team, user)
    _seed_rewards(team, user)
    for name in TOOL_NAMES:
        if not _exists(ToolSchema, team, name):
            spec = builtin_spec(name)
            timeout = 20.0 if name == "python" else 5.0  # python starts a sandboxed process
            content = ToolSchemaContent(
                name, spec["description"], spec["parameters"], "builtin", name, "", timeout
            )
            tool_schema_create(team=team, user=user, name=name, content=content)
    if not _exists(PromptTemplate, team, TEMPLATE_NAME):
        prompt_template_create(
            team=team,
            user=user,
            name=TEMPLATE_NAME,
            family="qwen_tool",
            source=family_source("qwen_tool"),
            description="The survey's Qwen tool template: tools as JSON Schema, <think>, <tool_call>.",
        )
    if not _exists(AgentProgram, team, AGENT_NAME):
        agent_program_create(
            team=team,
            user=user,
            name=AGENT_NAME,
            source=demo_agent_program(),
            description="The calculator task as a plain OpenAI-client tool loop: run with rollout backend"
            " agent, the Qwen tool template and the arithmetic data (docs/agents.md).",
        )


class DemoCatalogMissing(LookupError):
    """An item the demo runs pin is not in the team's catalog (seed_demo has not run for it)."""


def demo_run_pins(team: Team) -> dict:
    """The latest versions of the demo catalog items the demo runs pin (seed_demo creates them)."""

    def latest(model, name: str):
        item = model.objects.filter(team=team, name=name, is_deleted=False).first()
        if item is None:
            raise DemoCatalogMissing(f"{name!r} is missing from {team.name!r}")
        return item.latest_version()

    return {
        "dataset_version": latest(Dataset, DATASET_NAME),
        "sft_dataset_version": latest(Dataset, SFT_DATASET_NAME),
        "prompt_version": latest(PromptTemplate, TEMPLATE_NAME),
        "reward_version": latest(RewardDefinition, TOOL_REWARD_NAME),
        "tool_versions": [latest(ToolSchema, "calculator")],
    }
