"""Template filters and tags of the runs pages. Output is plain text: Django's autoescaping still applies."""

import json

from django import template

from trainers.workbench_api import Phase
from workbench.runs.models import Run, RunStatus
from workbench.runs.telemetry.series import SFTProgress, sft_progress

register = template.Library()

# What the status strip says while a running run reports a phase between its steps.
PHASE_TEXT = {
    Phase.LOADING: "loading the model",
    Phase.SFT: "SFT warm start",
    Phase.STARTING_RL: "starting RL: building the trainer",
    Phase.EVALUATING: "evaluating the policy",
    Phase.SAVING: "saving a checkpoint",
}


@register.filter
def pretty_json(value) -> str:
    """Indented JSON of a tool call's arguments (escaped by the template like any text)."""
    return json.dumps(value, indent=2, ensure_ascii=False, sort_keys=True, default=str)


@register.filter
def plain(value) -> str:
    """A value as a reader writes it: text as it is, anything else as compact JSON (never a Python repr)."""
    return value if isinstance(value, str) else json.dumps(value, ensure_ascii=False, default=str)


@register.filter
def get_item(mapping, key):
    return mapping.get(key) if isinstance(mapping, dict) else None


@register.simple_tag
def run_sft_progress(run) -> SFTProgress | None:
    """`{% run_sft_progress run as sft %}`: the run's SFT warm-start progress, for the status strip."""
    return sft_progress(run=run)


@register.filter
def phase_text(run: Run) -> str:
    """What a running run is doing between steps, in words; empty while it trains past its first RL step
    (the strip's step counter says that) or when it is not running."""
    if run.status != RunStatus.RUNNING or not run.phase:
        return ""
    if run.phase == Phase.TRAINING:
        return "running RL step 1: rollouts, then the first update" if run.last_step is None else ""
    return PHASE_TEXT.get(run.phase, run.phase)
