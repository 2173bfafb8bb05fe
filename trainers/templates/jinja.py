"""Sandboxed Jinja2 rendering for prompt templates, including ones users edit in the workbench.

Every render runs in a bounded worker process (trainers.bounded): Jinja's sandbox stops attribute and
mutation escapes but not a nested `range(99999)` loop or `9**9**9**9`. The worker stops a render at
MAX_RENDER_BYTES of output, at RENDER_LIMITS' CPU time and deadline, and refuses integer powers and
sequence repeats too large to build.
"""

from __future__ import annotations

import functools
import json
import math
from typing import Any

import jinja2
from jinja2.sandbox import ImmutableSandboxedEnvironment, SecurityError

from trainers.bounded import BoundedCallError, BoundedRunner, BoundsExceeded, Limits

MAX_RENDER_BYTES = 1 << 20  # a prompt's text; 1 MiB is far beyond any model's context
MAX_POWER_DIGITS = 10_000
RENDER_LIMITS = Limits(cpu_s=5, wall_s=10.0, memory_mb=1024, output_bytes=2 * MAX_RENDER_BYTES)
RENDER_IN_WORKER = "trainers.templates.jinja:render_capped"
RENDERER = BoundedRunner(RENDER_LIMITS, preload=("trainers.templates.jinja",))


class TemplateRenderError(ValueError):
    """A prompt template failed to compile or render; the message names the line when known."""


class _BoundedSandbox(ImmutableSandboxedEnvironment):
    """The immutable sandbox, with `*` and `**` checked before they build something huge."""

    intercepted_binops = frozenset({"*", "**"})

    def call_binop(self, context: Any, op: str, left: Any, right: Any) -> Any:
        if op == "**" and _int_power_digits(left, right) > MAX_POWER_DIGITS:
            raise SecurityError(f"the power has more than {MAX_POWER_DIGITS} digits")
        if op == "*" and _repeat_length(left, right) > MAX_RENDER_BYTES:
            raise SecurityError(f"a repetition of more than {MAX_RENDER_BYTES} items")
        return super().call_binop(context, op, left, right)


def _int_power_digits(base: Any, exponent: Any) -> float:
    if not (isinstance(base, int) and isinstance(exponent, int)) or abs(base) <= 1 or exponent <= 0:
        return 0.0
    return exponent * math.log10(abs(base))


def _repeat_length(left: Any, right: Any) -> int:
    for seq, times in ((left, right), (right, left)):
        if isinstance(seq, str | list | tuple) and isinstance(times, int):
            return len(seq) * times
    return 0


def _environment() -> ImmutableSandboxedEnvironment:
    env = _BoundedSandbox(undefined=jinja2.StrictUndefined, keep_trailing_newline=True, autoescape=False)
    env.filters["tojson"] = lambda value, indent=None: json.dumps(value, indent=indent, ensure_ascii=False)
    return env


_ENV = _environment()


def render_template_source(source: str, context: dict[str, Any]) -> str:
    """Render `source` with `context` (JSON values) in the immutable sandbox, in a bounded worker."""
    try:
        result = RENDERER.call(RENDER_IN_WORKER, source, context)
    except BoundsExceeded as exc:
        raise TemplateRenderError(f"template render {exc}") from None
    except BoundedCallError as exc:
        raise TemplateRenderError(f"template render failed: {exc}") from None
    if "error" in result:
        raise TemplateRenderError(result["error"])
    return result["text"]


def render_capped(source: str, context: dict[str, Any]) -> dict[str, str]:
    """{"text": the rendering} or {"error": why not}; stops once the text passes MAX_RENDER_BYTES."""
    try:
        return {"text": _render(source, context)}
    except TemplateRenderError as exc:
        return {"error": str(exc)}


def _render(source: str, context: dict[str, Any]) -> str:
    try:
        template = _compile(source)
    except jinja2.TemplateSyntaxError as exc:
        raise TemplateRenderError(f"template syntax error on line {exc.lineno}: {exc.message}") from exc
    except SecurityError as exc:  # constant folding at compile time hit a refused operation
        raise TemplateRenderError(f"template uses a forbidden operation: {exc}") from exc
    try:
        return _joined(template.generate(**context))
    except TemplateRenderError:
        raise
    except SecurityError as exc:
        raise TemplateRenderError(f"template uses a forbidden operation: {exc}") from exc
    except MemoryError:
        raise  # the worker reports it and is replaced
    except Exception as exc:  # undefined names, 1/0, overflow: the template's own error, with its line
        line = _render_line(exc)
        where = f" on line {line}" if line else ""
        what = str(exc) if isinstance(exc, jinja2.TemplateError) else f"{type(exc).__name__}: {exc}"
        raise TemplateRenderError(f"template error{where}: {what}") from exc


def _joined(chunks: Any) -> str:
    parts, size = [], 0
    for chunk in chunks:
        size += len(chunk.encode("utf-8", "surrogatepass"))
        if size > MAX_RENDER_BYTES:
            raise TemplateRenderError(f"template render exceeded {MAX_RENDER_BYTES} bytes")
        parts.append(chunk)
    return "".join(parts)


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
