"""Template filters for the runs pages. Output is plain text, so Django's autoescaping still applies."""

import json

from django import template

register = template.Library()


@register.filter
def pretty_json(value) -> str:
    """Indented JSON of a tool call's arguments (escaped by the template like any text)."""
    return json.dumps(value, indent=2, ensure_ascii=False, sort_keys=True, default=str)


@register.filter
def get_item(mapping, key):
    return mapping.get(key) if isinstance(mapping, dict) else None
