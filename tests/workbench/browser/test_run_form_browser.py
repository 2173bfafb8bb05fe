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


def test_deepspeed_fields_show_only_with_the_deepspeed_engine_and_their_labels_do_not_overlap(
    page, login, member
):
    login(member)
    page.goto("/runs/new/?preset=toolrl")
    page.locator("#section-training > summary").click()
    deepspeed = page.locator(".field[data-path^='training.deepspeed.']")
    assert deepspeed.count() >= 5
    expect(page.locator("[name='training.engine']")).to_have_value("local")
    for index in range(deepspeed.count()):
        expect(deepspeed.nth(index)).to_be_hidden()
    page.locator("[name='training.engine']").select_option("deepspeed")
    for index in range(deepspeed.count()):
        expect(deepspeed.nth(index)).to_be_visible()
    texts = page.locator("#section-training .field > label").evaluate_all(TEXT_AND_FIELD_BOXES)
    for text, field in texts:  # each label's text within its own field, none over another's
        assert field["x"] <= text["x"] and text["x"] + text["width"] <= field["x"] + field["width"] + 0.5
    for i, (a, _) in enumerate(texts):
        assert not any(overlap(a, b) for b, _ in texts[i + 1 :]), a
    page.locator("[name='training.engine']").select_option("local")
    expect(page.locator("[name='training.deepspeed.ranks']")).to_be_hidden()


def test_a_long_reward_name_stays_inside_its_fieldset(page, login, member, team):
    from workbench.rewards.services import reward_definition_create

    name = "a reward with a long descriptive name " * 2 + "(correctness and format)"
    components = [{"name": "correctness", "weight": 1.0}]
    reward_definition_create(team=team, user=member, name=name[:100], components=components)
    login(member)
    page.goto("/runs/new/")
    select, fieldset = box(page.locator("[name='reward_version']")), box(page.locator("#section-lead"))
    assert fieldset["x"] <= select["x"] and select["x"] + select["width"] <= fieldset["x"] + fieldset["width"]
    assert page.evaluate("document.documentElement.scrollWidth <= window.innerWidth")  # no sideways scroll


# [the box of a label's text, the box of its field] for each label: a label's own box keeps to its column
# while its text may run past it
TEXT_AND_FIELD_BOXES = """labels => labels.map(label => {
  const range = document.createRange();
  range.selectNodeContents(label);
  const rect = (r) => ({x: r.left, y: r.top, width: r.width, height: r.height});
  return [rect(range.getBoundingClientRect()), rect(label.closest(".field").getBoundingClientRect())];
})"""


def box(locator) -> dict:
    found = locator.bounding_box()
    assert found is not None, f"{locator} is not laid out"
    return found


def overlap(a: dict, b: dict) -> bool:
    return (
        a["x"] < b["x"] + b["width"]
        and b["x"] < a["x"] + a["width"]
        and a["y"] < b["y"] + b["height"]
        and b["y"] < a["y"] + a["height"]
    )


def test_the_demo_recipe_from_home_opens_the_form_with_the_demo_catalog_pinned(
    page, login, team, member, settings, tmp_path
):
    """A newcomer's first run: home lists each recipe with what it is; the demo's opens the form with the
    demo catalog already chosen in every pin."""
    from workbench import demo_catalog

    settings.MEDIA_ROOT = tmp_path
    demo_catalog.seed_demo_catalog(team=team, user=member)
    login(member)
    page.goto("/")
    demo = page.locator("#home-recipes li").first
    expect(demo).to_contain_text("learns within minutes on a CPU worker")
    demo.get_by_role("link", name="demo_calculator").click()
    expect(page.locator("[name='dataset_version'] option:checked")).to_have_text(
        f"{demo_catalog.DATASET_NAME} v1"
    )
    expect(page.locator("[name='sft_dataset_version'] option:checked")).to_have_text(
        f"{demo_catalog.SFT_DATASET_NAME} v1"
    )
    expect(page.locator("[name='tool_versions'] option:checked")).to_have_text("calculator v1")
    expect(page.locator(".pins-help")).to_be_visible()
