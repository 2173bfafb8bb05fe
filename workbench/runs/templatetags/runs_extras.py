"""Template filters and tags of the runs pages. Output is plain text: Django's autoescaping still applies."""

import json

from django import template

from workbench.runs.telemetry.series import SFTProgress, sft_progress

register = template.Library()


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
