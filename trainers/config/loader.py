"""Read and validate a run config from a dict, a JSON file or a YAML file, with errors by key path."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from pydantic import ValidationError

from trainers.config.schema import RunConfig


class ConfigError(ValueError):
    """A config that does not validate; `errors` holds (key path, message) pairs."""

    def __init__(self, errors: list[tuple[str, str]], source: str = "config") -> None:
        self.errors = errors
        lines = "\n".join(f"  {path or '(root)'}: {message}" for path, message in errors)
        super().__init__(f"invalid {source}:\n{lines}")


def _child(node: Any, part: Any) -> tuple[bool, Any]:
    if isinstance(node, dict) and part in node:
        return True, node[part]
    if isinstance(node, list) and isinstance(part, int) and 0 <= part < len(node):
        return True, node[part]
    return False, None


def _key_path(loc: tuple[Any, ...], data: Any, *, names_a_key: bool = True) -> str:
    """Dotted path of an error; pydantic's union tags (not keys of the input) are left out. The last
    part may be a key the input lacks (a missing or unknown one) only if the error `names_a_key`."""
    parts, node = [], data
    for i, part in enumerate(loc):
        found, child = _child(node, part)
        if found:
            node = child
        elif (i < len(loc) - 1 or not names_a_key) and isinstance(part, str):
            continue  # a discriminator tag or validator name pydantic inserted
        parts.append(str(part))
    return ".".join(parts)


def _error_loc(error: Any) -> tuple[Any, ...]:
    """Where an error is; an unknown union tag (estimator, filter name) is an error of the tag's key."""
    loc = tuple(error["loc"])
    if error["type"] == "union_tag_invalid":
        return (*loc, error["ctx"]["discriminator"].strip("'"))
    return loc


def error_list(exc: ValidationError, data: Any) -> list[tuple[str, str]]:
    """(key path, message) for each error of a failed validation of `data`."""
    return [
        # a validator's error (value_error) is about the values it checked, never about a missing key
        (_key_path(_error_loc(e), data, names_a_key=e["type"] != "value_error"), e["msg"])
        for e in exc.errors()
    ]


def validate_config(data: Any, source: str = "config") -> RunConfig:
    """A RunConfig from plain data; raises ConfigError naming each bad key."""
    try:
        return RunConfig.model_validate(data)
    except ValidationError as exc:
        raise ConfigError(error_list(exc, data), source) from None


def _read(path: Path) -> Any:
    text = path.read_text(encoding="utf-8")
    if path.suffix.lower() in (".yaml", ".yml"):
        try:
            import yaml
        except ImportError:
            raise ConfigError([("", "reading YAML needs pyyaml; use JSON")], str(path)) from None
        try:
            return yaml.safe_load(text)
        except yaml.YAMLError as exc:
            raise ConfigError([("", f"not valid YAML: {exc}")], str(path)) from None
    try:
        return json.loads(text)
    except json.JSONDecodeError as exc:
        raise ConfigError([("", f"not valid JSON: {exc}")], str(path)) from None


def load_config(path: str | Path) -> RunConfig:
    """Read a JSON or YAML (.yaml/.yml) run config and validate it."""
    path = Path(path)
    return validate_config(_read(path), str(path))
