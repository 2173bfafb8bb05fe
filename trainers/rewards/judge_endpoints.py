"""The judge endpoints the operator registers: name -> OpenAI-compatible base URL, model, key, timeout.

Only the operator registers judges, in `WORKBENCH_JUDGES`: a JSON object, or the path of a JSON file
holding one. A run config names a judge, never a URL, so nothing a team writes can reach a host the
operator did not register (and requests still pass the egress allowlist, WORKBENCH_EGRESS_ALLOW).

    {"grader": {"url": "http://vllm.internal:8000/v1", "model": "Qwen/Qwen2.5-7B-Instruct",
                "api_key_env": "GRADER_KEY", "timeout_s": 30}}
"""

from __future__ import annotations

import json
import os
import re
from pathlib import Path

from pydantic import BaseModel, ConfigDict, Field, ValidationError

JUDGES_ENV = "WORKBENCH_JUDGES"
NAME_PATTERN = r"^[A-Za-z0-9][A-Za-z0-9_.-]{0,63}$"


class JudgeEndpointError(ValueError):
    """The operator's judge list is malformed, or a judge name is not registered."""


class JudgeEndpoint(BaseModel):
    """One registered judge: where it answers `POST {url}/chat/completions`, and how."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    url: str = Field(pattern=r"^https?://.+/v1/?$", description="OpenAI-compatible base URL ending in /v1")
    model: str = Field(min_length=1, description="the model name sent in each request")
    api_key_env: str | None = Field(None, description="environment variable holding the bearer key")
    timeout_s: float = Field(60.0, gt=0, le=600, description="per-request limit, connect to last byte")
    max_concurrency: int = Field(8, ge=1, le=256, description="requests in flight at once per batch")

    @property
    def chat_url(self) -> str:
        return f"{self.url.rstrip('/')}/chat/completions"

    def api_key(self) -> str | None:
        """The key from the environment; None when the judge needs none. KeyError if its variable is unset."""
        if self.api_key_env is None:
            return None
        return os.environ[self.api_key_env]


def parse_judges(text: str) -> dict[str, JudgeEndpoint]:
    """Judges by name from the setting's text: a JSON object, or the path of a JSON file holding one."""
    text = text.strip()
    if not text:
        return {}
    source = JUDGES_ENV
    if not text.startswith(("{", "[")):
        path = Path(text)
        try:
            text, source = path.read_text(encoding="utf-8"), str(path)
        except OSError as exc:
            raise JudgeEndpointError(f"{JUDGES_ENV}: cannot read {path}: {exc.strerror}") from None
    try:
        raw = json.loads(text)
    except json.JSONDecodeError as exc:
        raise JudgeEndpointError(f"{source}: not JSON: {exc.msg} (line {exc.lineno})") from None
    if not isinstance(raw, dict):
        raise JudgeEndpointError(f"{source}: must be a JSON object of judges by name")
    return {name: _endpoint(source, name, item) for name, item in raw.items()}


def _endpoint(source: str, name: str, item: object) -> JudgeEndpoint:
    if re.fullmatch(NAME_PATTERN, name) is None:
        raise JudgeEndpointError(f"{source}: {name!r} is not a judge name (letters, digits, _ . -)")
    try:
        return JudgeEndpoint.model_validate(item)
    except ValidationError as exc:
        first = exc.errors()[0]
        where = ".".join(str(p) for p in first["loc"]) or "judge"
        raise JudgeEndpointError(f"{source}: judge {name!r}: {where}: {first['msg']}") from None


def registered_judges() -> dict[str, JudgeEndpoint]:
    """The operator's judges, from the process environment."""
    return parse_judges(os.environ.get(JUDGES_ENV, ""))


def judge_endpoint(name: str) -> JudgeEndpoint:
    """The judge registered as `name`; JudgeEndpointError listing the registered names otherwise."""
    judges = registered_judges()
    if name not in judges:
        known = ", ".join(sorted(judges)) or f"none ({JUDGES_ENV} is empty)"
        raise JudgeEndpointError(f"no judge named {name!r} is registered; registered: {known}")
    return judges[name]
