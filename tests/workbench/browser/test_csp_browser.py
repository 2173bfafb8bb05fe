"""In Debian's chromium: the Content-Security-Policy is enforced, and what used inline handlers still works.

The page fixture fails a test on any console error, and chromium reports every CSP violation as one, so
each test here also proves its pages need nothing the policy blocks.
"""

import re

import pytest
from playwright.sync_api import expect

from workbench.accounts.models import Membership
from workbench.toolschemas.models import ToolSchema
from workbench.toolschemas.services import ToolSchemaContent, tool_schema_create, tool_schema_update

pytestmark = [pytest.mark.browser, pytest.mark.timeout(180)]

INJECT = """() => new Promise((resolve) => {
  document.addEventListener("securitypolicyviolation", (event) => {
    resolve([window.injected === true, event.violatedDirective]);
  });
  const script = document.createElement("script");
  script.textContent = "window.injected = true";
  document.head.append(script);
})"""


@pytest.fixture
def tool(team, member):
    """A tool schema with two versions."""
    parameters = {"type": "object", "properties": {}}
    first = ToolSchemaContent("calculator", "first", parameters, "builtin", "calculator")
    tool_schema_create(team=team, user=member, name="calc", content=first)
    item = ToolSchema.objects.get(name="calc")
    second = ToolSchemaContent("calculator", "second", parameters, "builtin", "calculator")
    tool_schema_update(item=item, user=member, content=second)
    return item


def test_the_browser_refuses_an_injected_inline_script(page, login, member, console_log):
    console_log.allow("Content Security Policy")  # the refusal is the point
    login(member)
    ran, directive = page.evaluate(INJECT)
    assert ran is False and directive.startswith("script-src")


def test_version_picker_history_diff_and_delete_dialog_work_without_inline_code(page, login, member, tool):
    login(member)
    page.goto(f"/tools/{tool.pk}/")
    expect(page.locator(".description")).to_have_text("second")
    page.get_by_label("Version").select_option("1")  # submits on change
    expect(page).to_have_url(re.compile(r"\?version=1$"))
    expect(page.locator(".description")).to_have_text("first")

    page.get_by_role("link", name="History").click()
    page.get_by_role("button", name="Show diff").click()
    expect(page).to_have_url(re.compile(rf"/{tool.pk}/diff/1/2/$"))

    page.goto(f"/tools/{tool.pk}/")
    page.get_by_role("link", name="Delete").click()
    expect(page.locator("#confirm-delete")).to_be_visible()
    page.get_by_role("button", name="Cancel").click()
    expect(page.locator("#confirm-delete")).to_have_count(0)
    assert not ToolSchema.objects.get(pk=tool.pk).is_deleted


def test_removing_a_member_asks_first(page, login, admin, member, team):
    login(admin)
    page.goto(f"/teams/{team.pk}/")
    remove = page.locator("#members tr", has_text=member.username).get_by_role("button", name="Remove")
    page.once("dialog", lambda dialog: dialog.dismiss())
    remove.click()
    expect(page.locator("#members")).to_contain_text(member.username)
    assert Membership.objects.filter(user=member, team=team).exists()
    page.once("dialog", lambda dialog: dialog.accept())
    remove.click()
    expect(page.locator("#members")).not_to_contain_text(member.username)
    assert not Membership.objects.filter(user=member, team=team).exists()
