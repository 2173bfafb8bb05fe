"""Display filters for catalog pages; their output stays auto-escaped (nothing is marked safe)."""

import json

from django import template

register = template.Library()


@register.filter
def pretty_json(value, indent: int = 2) -> str:
    """`{{ value|pretty_json }}`: JSON text of a stored value (`:0` for one line)."""
    if value is None:
        return ""
    return json.dumps(value, indent=indent or None, ensure_ascii=False, sort_keys=True)


@register.filter
def short_number(value) -> str:
    """A score with at most four significant digits: 1.5, 0.3333, -3."""
    try:
        return f"{float(value):.4g}"
    except (TypeError, ValueError):
        return ""
