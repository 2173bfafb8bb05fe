"""End to end in chromium against a real Celery worker, PostgreSQL and Redis: launch a run pinned to the
demo catalog, watch its charts fill, open a trajectory, cancel a second run, compare the two."""

from __future__ import annotations

import re

import pytest
from playwright.sync_api import expect

from workbench.demo_catalog import seed_demo_catalog

pytestmark = [pytest.mark.browser, pytest.mark.services, pytest.mark.slow, pytest.mark.timeout(600)]

SMALL = {
    "rollout.prompts_per_step": "2",
    "rollout.samples_per_prompt": "2",
    "limits.max_new_tokens_per_turn": "12",
    "limits.max_turns": "2",
}


def fill_run_form(page, name: str, steps: int) -> None:
    page.locator("[name='name']").fill(name)
    page.locator("[name='training.steps']").fill(str(steps))
    for path, value in SMALL.items():
        section = page.locator(f"details:has([name='{path}'])")
        if section.count() and section.get_attribute("open") is None:
            section.locator(":scope > summary").click()  # config sections start collapsed
        page.locator(f"[name='{path}']").fill(value)


def test_launch_watch_inspect_cancel_compare(page, login, member, team, celery_worker):
    seed_demo_catalog(team=team, user=member)
    login(member)
    page.goto("/runs/new/")
    for pin in ("dataset_version", "prompt_version", "reward_version"):
        page.locator(f"[name='{pin}']").select_option(index=1)
    page.locator("[name='tool_versions']").select_option(label="calculator v1")
    fill_run_form(page, "e2e short", steps=3)
    page.get_by_role("button", name="Launch").click()
    page.wait_for_url(re.compile(r"/runs/\d+/$"))
    first_url = page.url
    expect(page.locator("#chart-reward .main-svg").first).to_be_visible(timeout=300_000)
    expect(page.locator("#run-status")).to_have_attribute("data-status", "succeeded", timeout=300_000)
    expect(page.locator("#cancel-run")).to_be_hidden()  # the page was opened while the run was in flight

    page.get_by_role("link", name="Trajectories", exact=True).click()
    page.locator("#trajectory-rows tbody a").first.click()
    expect(page.locator(".turns .role-assistant").first).to_be_visible()

    page.goto(first_url)
    page.get_by_role("link", name="Clone").click()
    fill_run_form(page, "e2e long", steps=500)
    page.get_by_role("button", name="Launch").click()
    page.wait_for_url(re.compile(r"/runs/\d+/$"))
    expect(page.locator("#run-status")).to_have_attribute(
        "data-last-step", re.compile(r"\d"), timeout=300_000
    )
    page.once("dialog", lambda dialog: dialog.accept())  # Cancel asks first
    page.locator("#cancel-run").click()
    expect(page.locator("#run-status")).to_have_attribute("data-status", "cancelled", timeout=60_000)
    expect(page.locator("#cancel-run")).to_be_hidden()

    page.goto("/runs/")
    for box in page.locator("#run-list input[name=runs]").all():
        box.check()
    page.get_by_role("button", name="Compare selected").click()
    expect(page.locator("#compare-chart .main-svg").first).to_be_visible()
    assert page.evaluate("document.getElementById('compare-chart').data.length") == 2
    expect(page.locator("#config-diff")).to_contain_text("training.steps")
