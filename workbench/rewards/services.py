"""Writes for reward definitions (every save is a new version) and "test on a sample"."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from django.conf import settings
from django.core.exceptions import ValidationError

from trainers.workbench_api import EgressPolicy, egress_policy, score_text
from workbench.accounts.models import Team
from workbench.catalog.services import catalog_item_create, catalog_version_create
from workbench.prompts.tokenizers import TINY, load_tokenizer
from workbench.rewards.definitions import definition_build
from workbench.rewards.models import RewardDefinition, RewardDefinitionVersion


def _version(*, components: list[dict[str, Any]], description: str, note: str) -> RewardDefinitionVersion:
    if not components:
        raise ValidationError("Add at least one component.")
    try:
        definition = definition_build(components)
    except ValueError as exc:
        raise ValidationError(str(exc)) from None
    return RewardDefinitionVersion(
        definition=definition.model_dump(mode="json"), description=description, note=note
    )


def reward_definition_create(
    *, team: Team, user, name: str, components: list[dict[str, Any]], description: str = "", note: str = ""
) -> RewardDefinitionVersion:
    version = _version(components=components, description=description, note=note)
    return catalog_item_create(
        item=RewardDefinition(team=team, name=name.strip()), version=version, user=user
    )


def reward_definition_update(
    *, item: RewardDefinition, user, components: list[dict[str, Any]], description: str = "", note: str = ""
) -> RewardDefinitionVersion:
    version = _version(components=components, description=description, note=note)
    return catalog_version_create(item=item, version=version, user=user)


@dataclass(frozen=True)
class SampleScore:
    components: dict[str, float] = field(default_factory=dict)
    weights: dict[str, float] = field(default_factory=dict)
    total: float | None = None
    error: str | None = None
    notes: list[str] = field(default_factory=list)  # e.g. an answer check that timed out


def reward_definition_test(
    *,
    version: RewardDefinitionVersion,
    text: str,
    ground_truth: dict[str, Any],
    template: str,
    tool_results: list[dict[str, Any]] | None = None,
    step: int = 0,
    total_steps: int | None = None,
) -> SampleScore:
    """Each component's raw score, its weight at `step` and the total, for one pasted model output. A judge
    component asks its judge (WORKBENCH_JUDGES) within the operator's egress allowlist."""
    tokenizer = load_tokenizer(TINY)  # token counts for length-based components (overlong penalty)
    try:
        with egress_policy(EgressPolicy.parse(settings.WORKBENCH_EGRESS_ALLOW)):
            scores = score_text(
                version.build(),  # refused when a judge it names is no longer registered
                text,
                ground_truth,
                template,
                tool_results,
                step=step,
                total_steps=total_steps,
                encode=lambda s: tokenizer(s, add_special_tokens=False)["input_ids"],
            )
    except (ValueError, TypeError, KeyError) as exc:  # e.g. malformed tool results, a component's refusal
        return SampleScore(error=f"{type(exc).__name__}: {exc}")
    return SampleScore(scores["components"], scores["weights"], scores["total"], notes=scores["notes"])
