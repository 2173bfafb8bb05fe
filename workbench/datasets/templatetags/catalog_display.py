"""`{{ value|pretty_json }}`: JSON text of a stored value for display; the result stays auto-escaped."""

import json

from django import template

register = template.Library()


@register.filter
def pretty_json(value, indent: int = 2) -> str:
    if value is None:
        return ""
    return json.dumps(value, indent=indent or None, ensure_ascii=False, sort_keys=True)
