"""Validate an OpenAI-style function spec and a call's arguments with the JSON Schema meta-schema."""

from __future__ import annotations

import re
from typing import Any

import jsonschema
from jsonschema.validators import validator_for

NAME_PATTERN = re.compile(r"^[A-Za-z0-9_-]{1,64}$")  # OpenAI's rule for function names


def _path(parts) -> str:
    return "/".join(str(p) for p in parts)


def parameters_error(parameters: Any) -> str | None:
    """Why `parameters` is not a valid JSON Schema for a function's arguments, or None."""
    if not isinstance(parameters, dict):
        return "must be a JSON object (a JSON Schema)"
    try:
        validator_for(parameters).check_schema(parameters)
    except jsonschema.SchemaError as exc:
        where = _path(exc.absolute_path)
        return f"not a valid JSON Schema{' at ' + where if where else ''}: {exc.message}"
    if parameters.get("type") != "object":
        return 'the arguments of a function are an object: set "type": "object"'
    return None


def name_error(name: str) -> str | None:
    """Why `name` cannot be a function name, or None."""
    if not NAME_PATTERN.match(name):
        return "use 1-64 letters, digits, underscores or hyphens"
    return None


def arguments_error(parameters: dict[str, Any], arguments: Any) -> str | None:
    """The validator's message for arguments that do not match the schema, or None."""
    try:
        jsonschema.validate(arguments, parameters)
    except jsonschema.ValidationError as exc:
        where = _path(exc.absolute_path)
        return f"{'at ' + where + ': ' if where else ''}{exc.message}"
    return None


def function_spec(*, name: str, description: str, parameters: dict[str, Any]) -> dict[str, Any]:
    """The spec shown to the model, the same shape as `trainers.tools.base.Tool.spec()`."""
    return {
        "type": "function",
        "function": {"name": name, "description": description, "parameters": parameters},
    }
