"""Template rendering is bounded: runaway loops, huge values and huge output end with a clear error."""

from __future__ import annotations

import pytest

from trainers.bounded import Limits
from trainers.templates import jinja
from trainers.templates.jinja import MAX_RENDER_BYTES, TemplateRenderError, render_template_source

pytestmark = pytest.mark.timeout(300)  # without the bounds the loop below runs for days
NESTED_LOOP = "{% for i in range(99999) %}{% for j in range(99999) %}{% endfor %}{% endfor %}"


@pytest.fixture
def short_bounds(monkeypatch):
    monkeypatch.setattr(
        jinja.RENDERER, "limits", Limits(cpu_s=1, wall_s=300, output_bytes=2 * MAX_RENDER_BYTES)
    )


@pytest.mark.slow
def test_a_nested_range_loop_stops_at_the_cpu_limit_and_the_next_render_works(short_bounds):
    with pytest.raises(TemplateRenderError, match="template render exceeded 1 s of CPU time"):
        render_template_source(NESTED_LOOP, {})
    assert render_template_source("{{ q }}!", {"q": "next"}) == "next!"


def test_a_huge_repetition_is_refused_before_it_is_built():
    with pytest.raises(
        TemplateRenderError, match=f"forbidden operation: a repetition of more than {MAX_RENDER_BYTES}"
    ):
        render_template_source("{{ 'x'*10**7 }}", {})


def test_a_huge_integer_power_is_refused():
    with pytest.raises(
        TemplateRenderError, match="forbidden operation: the power has more than 10000 digits"
    ):
        render_template_source("{{ 9 ** 99999 }}", {})
    assert render_template_source("{{ 2 ** 10 }}", {}) == "1024"


def test_output_stops_at_the_byte_cap():
    source = "{% for i in range(99999) %}{{ 'x' * 1000 }}{% endfor %}"
    with pytest.raises(TemplateRenderError, match=f"template render exceeded {MAX_RENDER_BYTES} bytes"):
        render_template_source(source, {})


def test_python_errors_become_template_errors_with_the_line():
    with pytest.raises(TemplateRenderError, match="line 2: ZeroDivisionError: division by zero"):
        render_template_source("ok\n{{ 1 / 0 }}", {})


def test_model_text_with_a_lone_surrogate_renders_unchanged():
    assert render_template_source("{{ q }}", {"q": "\udc80 lone surrogate"}) == "\udc80 lone surrogate"
