"""In Debian's chromium: an agent program refused for a syntax error, then saved, then edited."""

import pytest
from playwright.sync_api import expect

from workbench.agents.models import AgentProgramVersion

pytestmark = [pytest.mark.browser, pytest.mark.timeout(240)]

PROGRAM = 'def run(task, client):\n    return {"answer": "4"}\n'


def test_a_syntax_error_is_shown_then_a_valid_program_is_saved(page, login, member, screenshot):
    login(member)
    page.goto("/agents/")
    page.get_by_role("link", name="New agent program").click()
    page.get_by_label("Name", exact=True).fill("four")
    page.get_by_label("Source").fill(PROGRAM.replace("):", ")", 1))
    page.get_by_role("button", name="Save").click()
    expect(page.locator("#agent-form .errorlist")).to_have_text("agent_program.py: line 1: expected ':'")
    assert not AgentProgramVersion.objects.exists()
    screenshot("agent-program-syntax-error")

    page.get_by_label("Source").fill(PROGRAM)
    page.get_by_role("button", name="Save").click()
    expect(page.locator("#agent-source")).to_have_text(PROGRAM)
    expect(page.get_by_role("heading", level=1)).to_contain_text("four v1")
    page.get_by_role("link", name="Edit").click()
    page.get_by_label("Source").fill(PROGRAM.replace('"4"', '"5"'))
    page.get_by_role("button", name="Save").click()
    expect(page.get_by_role("heading", level=1)).to_contain_text("four v2")
    page.goto("/agents/")
    expect(page.locator("#agent-list")).to_contain_text("v2")
