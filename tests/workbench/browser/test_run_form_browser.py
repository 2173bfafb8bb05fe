"""The new-run form in chromium: it opens short (every config section collapsed) and an error in a
collapsed section comes back with that section open."""

import re
from pathlib import Path

import pytest
from playwright.sync_api import expect

pytestmark = [pytest.mark.browser, pytest.mark.timeout(120)]

OPEN = "details.config-section[open]"


def test_form_opens_collapsed_and_an_error_opens_its_section(page, login, member, console_log, screenshot):
    console_log.allow("/runs/new/")  # the invalid form comes back with status 400, on purpose
    login(member)
    page.goto("/runs/new/?preset=toolrl")
    sections = page.locator("details.config-section")
    assert sections.count() >= 15 and page.locator(OPEN).count() == 0
    expect(page.locator("[name='training.steps']")).to_be_visible()  # what people change leads
    expect(page.locator("[name='algorithm.eps']")).to_be_hidden()
    screenshot("runs-new-form")
    collapsed = page.evaluate("document.documentElement.scrollHeight")
    page.evaluate("document.querySelectorAll('details.config-section').forEach(d => d.open = true)")
    expanded = page.evaluate("document.documentElement.scrollHeight")
    assert collapsed * 3 < expanded  # the whole schema is still there, a click away

    page.goto("/runs/new/?preset=toolrl")
    page.locator("#section-algorithm > summary").click()
    page.locator("[name='algorithm.eps']").fill("0")
    page.locator("#section-algorithm > summary").click()  # collapsed again before launching
    expect(page.locator("[name='algorithm.eps']")).to_be_hidden()
    page.get_by_role("button", name="Launch").click()
    expect(page.locator(".has-error[data-path='algorithm.eps']")).to_be_visible()
    assert page.locator(OPEN).evaluate_all("els => els.map(e => e.id)") == ["section-algorithm"]


def test_the_config_yaml_copies_out_and_downloads_as_run_yaml(page, login, member):
    page.context.grant_permissions(["clipboard-read", "clipboard-write"])
    login(member)
    page.goto("/runs/new/?preset=toolrl")
    page.locator("#section-yaml > summary").click()
    shown = page.locator("#config-yaml-out").input_value()
    assert "training:" in shown
    page.get_by_role("button", name="Copy", exact=True).click()
    expect(page.get_by_role("button", name="Copied", exact=True)).to_be_visible()
    assert page.evaluate("navigator.clipboard.readText()") == shown
    with page.expect_download() as download:
        page.get_by_role("button", name="Download run.yaml").click()
    assert download.value.suggested_filename == "run.yaml"
    assert Path(download.value.path()).read_text(encoding="utf-8") == shown


def test_the_config_yaml_follows_the_fields_as_they_change(page, login, member):
    login(member)
    page.goto("/runs/new/?preset=toolrl")
    page.locator("#section-yaml > summary").click()
    shown = page.locator("#config-yaml-out")
    expect(shown).to_have_value(re.compile(r"\n  steps: 150\n"))
    page.locator("[name='training.steps']").fill("123")
    page.locator("[name='training.steps']").press("Tab")  # a change
    expect(shown).to_have_value(re.compile(r"\n  steps: 123\n"))
    page.locator("#section-algorithm > summary").click()
    page.locator("[name='algorithm.estimator']").select_option("rloo")
    expect(shown).to_have_value(re.compile(r"\n  estimator: rloo\n"))
    assert "name: toolrl" in shown.input_value()  # the preset's values stand for the rest
