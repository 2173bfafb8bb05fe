"""Sandboxed Jinja2 rendering for prompt templates, including ones users edit in the workbench."""

from __future__ import annotations

import functools
import json
from typing import Any

import jinja2
from jinja2.sandbox import ImmutableSandboxedEnvironment, SecurityError


class TemplateRenderError(ValueError):
    """A prompt template failed to compile or render; the message names the line when known."""


def _environment() -> ImmutableSandboxedEnvironment:
    env = ImmutableSandboxedEnvironment(
        undefined=jinja2.StrictUndefined, keep_trailing_newline=True, autoescape=False
    )
    env.filters["tojson"] = lambda value, indent=None: json.dumps(value, indent=indent, ensure_ascii=False)
    return env


_ENV = _environment()


def render_template_source(source: str, context: dict[str, Any]) -> str:
    """Render `source` with `context` in an immutable sandbox (no attribute or mutation escapes)."""
    try:
        template = _compile(source)
    except jinja2.TemplateSyntaxError as exc:
        raise TemplateRenderError(f"template syntax error on line {exc.lineno}: {exc.message}") from exc
    try:
        return template.render(**context)
    except SecurityError as exc:
        raise TemplateRenderError(f"template uses a forbidden operation: {exc}") from exc
    except jinja2.TemplateError as exc:
        line = _render_line(exc)
        where = f" on line {line}" if line else ""
        raise TemplateRenderError(f"template error{where}: {exc}") from exc


@functools.lru_cache(maxsize=64)
def _compile(source: str) -> jinja2.Template:
    """Compiled once per source: every trajectory of a rollout renders the same prompt template."""
    return _ENV.from_string(source)


def _render_line(exc: BaseException) -> int | None:
    """The template line a render-time error came from, read off the traceback."""
    tb, line = exc.__traceback__, None
    while tb is not None:
        if tb.tb_frame.f_code.co_filename == "<template>":
            line = tb.tb_lineno
        tb = tb.tb_next
    return line
