"""Sandboxed rendering of prompt sources, including user-edited ones."""

from __future__ import annotations

import pytest

from trainers.templates.jinja import TemplateRenderError, render_template_source


def test_renders_variables_and_the_tojson_filter():
    assert render_template_source("{{ q }}: {{ t | tojson }}", {"q": "Q", "t": {"a": 1}}) == 'Q: {"a": 1}'


def test_syntax_errors_name_the_line():
    with pytest.raises(TemplateRenderError, match="line 3"):
        render_template_source("a\nb\n{% if %}", {})


def test_undefined_variables_name_the_line():
    with pytest.raises(TemplateRenderError, match="line 2.*'nope' is undefined"):
        render_template_source("ok\n{{ nope }}", {})


def test_the_sandbox_refuses_dunder_attribute_access():
    with pytest.raises(TemplateRenderError, match="forbidden"):
        render_template_source("{{ q.__class__.__mro__ }}", {"q": "x"})


def test_the_sandbox_refuses_mutating_the_context():
    with pytest.raises(TemplateRenderError, match="forbidden"):
        render_template_source("{{ tools.append(1) }}", {"tools": []})
