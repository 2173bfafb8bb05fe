"""The new-run form's config as YAML: copied out as `python -m trainers train` reads it, pasted back in.

A pasted config is validated like a config file on the command line (missing keys take their defaults,
unknown keys are errors), then becomes the values the browser would have posted for each form field.
"""

from __future__ import annotations

import contextlib
import json
from typing import Any

import yaml
from django import forms

from trainers.workbench_api import ConfigError, validate_config

from .config_form import flatten

HEADER = (
    "# Run config, as `python -m trainers train` reads it. The workbench sets output_dir and the data\n"
    "# paths itself, and pinned catalog versions replace template, reward and tools at launch.\n"
)
# Set by the workbench for a run launched here; left out of the copy.
WORKBENCH_SET = ("output_dir",)


def config_to_yaml(config: dict[str, Any]) -> str:
    """The config as YAML, sections in schema order; normalised (defaults filled in) when it is valid."""
    with contextlib.suppress(ConfigError):  # an invalid config is copied out as entered
        config = validate_config(config).model_dump(mode="json")
    data = {key: value for key, value in config.items() if key not in WORKBENCH_SET}
    if isinstance(data.get("data"), dict):
        data["data"] = {k: v for k, v in data["data"].items() if k not in ("train_path", "eval_path")}
    return HEADER + yaml.safe_dump(data, sort_keys=False, allow_unicode=True, default_flow_style=False)


class YAMLConfigError(ValueError):
    """Pasted YAML that is no valid run config; `messages` are for the YAML field."""

    def __init__(self, messages: list[str]) -> None:
        self.messages = messages
        super().__init__("; ".join(messages))


def config_from_yaml(text: str) -> dict[str, Any]:
    """The normalised config of pasted YAML (with `name` only if given); YAMLConfigError naming each
    problem by key path."""
    try:
        data = yaml.safe_load(text)
    except yaml.YAMLError as exc:
        raise YAMLConfigError([f"not valid YAML: {exc}"]) from None
    if not isinstance(data, dict):
        raise YAMLConfigError(["the YAML must be a mapping of config sections (model:, training:, ...)"])
    try:
        config = validate_config(data).model_dump(mode="json")
    except ConfigError as exc:
        raise YAMLConfigError([f"{path or 'config'}: {message}" for path, message in exc.errors]) from None
    if "name" not in data:
        del config["name"]  # the form keeps its own
    return config


def posted_values(config: dict[str, Any], fields: dict[str, forms.Field]) -> dict[str, str]:
    """What the browser posts for `config` in these fields (an unticked box posts nothing)."""
    values = {}
    for path, value in flatten(config, fields).items():
        field = fields[path]
        if isinstance(field, forms.JSONField):
            values[path] = json.dumps(value)
        elif isinstance(field, forms.BooleanField):
            if value:
                values[path] = "on"
        else:
            values[path] = "" if value is None else str(value)
    return values
