"""Form fields generated from the trainers RunConfig JSON Schema, named by dotted config path.

Scalars become typed inputs (with the schema's bounds, enums, defaults and descriptions); lists, maps
and optional sections become JSON text areas. A discriminated union of sections (the advantage
estimators' parameters) becomes a choice of its tag and the fields of all its cases, each saying which
cases use it. Errors from the trainers validation come back keyed by the same paths, so each lands on
its own field (or on the nearest enclosing one).
"""

from __future__ import annotations

import json
from typing import Any

from django import forms

from trainers.workbench_api import RunConfig

# Set by the workbench itself: the run's name and the worker's run directory; data files come from pins.
SKIPPED = {"name", "output_dir", "data.train_path", "data.eval_path"}


def _resolve(node: dict[str, Any], defs: dict[str, Any]) -> dict[str, Any]:
    while "$ref" in node:
        node = {**defs[node["$ref"].split("/")[-1]], **{k: v for k, v in node.items() if k != "$ref"}}
    return node


def _nullable(node: dict[str, Any], defs: dict[str, Any]) -> tuple[dict[str, Any], bool]:
    """X | None -> (X, True); other unions are left to the JSON field."""
    options = node.get("anyOf")
    if not options:
        return node, False
    rest = [o for o in options if o.get("type") != "null"]
    if len(rest) == 1 and len(rest) < len(options):
        inner = _resolve(rest[0], defs)
        return {**inner, "description": node.get("description", inner.get("description", ""))}, True
    return node, False


def _merged_cases(node: dict[str, Any], defs: dict[str, Any]) -> dict[str, Any]:
    """One object with the union's tag as a choice and every case's properties, each described with the
    tags of the cases that have it ("grpo, gigpo: ...")."""
    tag, mapping = node["discriminator"]["propertyName"], node["discriminator"]["mapping"]
    properties: dict[str, Any] = {}
    users: dict[str, list[str]] = {}
    for name, ref in mapping.items():
        for key, prop in _resolve({"$ref": ref}, defs)["properties"].items():
            properties.setdefault(key, prop)
            users.setdefault(key, []).append(name)
    described = properties[tag].get("description", "")
    properties[tag] = {"type": "string", "enum": list(mapping), "description": described}
    del users[tag]
    for key, names in users.items():
        described = properties[key].get("description", "")
        properties[key] = {**properties[key], "description": f"{', '.join(names)}: {described}"}
    return {"type": "object", "properties": properties}


def _scalar_field(node: dict[str, Any], nullable: bool, label: str) -> forms.Field | None:
    kind, help_text, initial = node.get("type"), node.get("description", ""), node.get("default")
    common = {"label": label, "help_text": help_text, "required": not nullable, "initial": initial}
    if "enum" in node:
        choices = [("", "—")] if nullable else []
        return forms.ChoiceField(choices=choices + [(v, v) for v in node["enum"]], **common)
    if kind == "integer":
        return forms.IntegerField(min_value=node.get("minimum"), max_value=node.get("maximum"), **common)
    if kind == "number":
        return forms.FloatField(min_value=node.get("minimum"), max_value=node.get("maximum"), **common)
    if kind == "boolean":
        return forms.BooleanField(label=label, help_text=help_text, required=False, initial=initial)
    if kind == "string":
        return forms.CharField(**common)
    return None


class PrettyJSONField(forms.JSONField):
    """A JSON text area that shows its value indented, one key per line."""

    def prepare_value(self, value: Any) -> str:
        if isinstance(value, forms.fields.InvalidJSONInput):
            return value
        return json.dumps(value, indent=2, ensure_ascii=False)


def _json_field(label: str, help_text: str) -> forms.Field:
    return PrettyJSONField(
        label=label,
        help_text=help_text,
        required=False,
        widget=forms.Textarea(attrs={"rows": 6, "class": "json"}),
    )


def schema_fields(schema: dict[str, Any] | None = None) -> dict[str, forms.Field]:
    """Dotted path -> form field for every leaf of the run config schema, in schema order."""
    schema = schema or RunConfig.json_schema()
    defs = schema.get("$defs", {})
    fields: dict[str, forms.Field] = {}

    def walk(node: dict[str, Any], path: str) -> None:
        node, nullable = _nullable(_resolve(node, defs), defs)
        if "discriminator" in node:
            node = _merged_cases(node, defs)
        if node.get("type") == "object" and "properties" in node and not nullable:
            for name, child in node["properties"].items():
                walk(child, f"{path}.{name}" if path else name)
            return
        if path in SKIPPED:
            return
        field = None if nullable and node.get("type") == "object" else _scalar_field(node, nullable, path)
        fields[path] = field or _json_field(path, node.get("description", ""))

    walk(schema, "")
    return fields


def flatten(config: dict[str, Any], fields: dict[str, forms.Field]) -> dict[str, Any]:
    """Form values: the value at each field's path; where the config lacks the path (another estimator's
    parameter, say), the field's initial value, its schema default."""
    out = {}
    for path, field in fields.items():
        node: Any = config
        for part in path.split("."):
            node = node.get(part, field.initial) if isinstance(node, dict) else field.initial
        out[path] = node
    return out


def unflatten(values: dict[str, Any]) -> dict[str, Any]:
    """{"rollout.samples_per_prompt": 8} -> {"rollout": {"samples_per_prompt": 8}}; blanks become None."""
    config: dict[str, Any] = {}
    for path, value in values.items():
        *parents, leaf = path.split(".")
        node = config
        for part in parents:
            node = node.setdefault(part, {})
        node[leaf] = None if value == "" else value
    return config


def field_for_error(path: str, names: set[str]) -> str | None:
    """The form field an error at `path` belongs to: the path itself or its nearest listed ancestor."""
    parts = path.split(".")
    for end in range(len(parts), 0, -1):
        candidate = ".".join(parts[:end])
        if candidate in names:
            return candidate
    return None


def short_value(value: Any, width: int = 40) -> str:
    """A value as one short token of a section summary: lists of named items by their names."""
    if isinstance(value, bool):
        return "on" if value else "off"
    if value is None:
        return "none"
    if isinstance(value, float):
        return f"{value:g}"
    if isinstance(value, list) and value and all(isinstance(v, dict) and "name" in v for v in value):
        text = ", ".join(str(v["name"]) for v in value)
    elif isinstance(value, list | dict):
        text = json.dumps(value, separators=(",", ":"), ensure_ascii=False)
    else:
        text = str(value)
    return text if len(text) <= width else text[: width - 1] + "…"


def changed_summary(values: dict[str, Any], defaults: dict[str, Any]) -> str:
    """'key=value, ...' for each path whose value differs from its default, named below its section."""
    parts = []
    for path, value in values.items():
        if value != defaults.get(path):
            name = path.split(".", 1)[1] if "." in path else path
            parts.append(f"{name}={short_value(value)}")
    return ", ".join(parts)
