"""In Debian's chromium: the catalog pages end to end (uploads through the real Celery worker)."""

import json

import pytest
from playwright.sync_api import expect

from workbench.datasets.models import DatasetUpload
from workbench.demo_catalog import seed_demo_catalog

pytestmark = [pytest.mark.browser, pytest.mark.timeout(240)]


@pytest.fixture
def uploaded_files(transactional_db):
    """The live server and the worker share the default media directory; remove what the test stored."""
    yield
    for upload in DatasetUpload.objects.all():
        upload.file.delete(save=False)


def _jsonl(rows) -> str:
    return "".join(json.dumps(row) + "\n" for row in rows)


def _upload(page, name: str, content: str) -> None:
    page.goto("/datasets/new/")
    page.get_by_label("Name", exact=True).fill(name)
    page.get_by_label("Eval fraction").fill("0.25")
    page.get_by_label("File").set_input_files({"name": f"{name}.jsonl", "mimeType": "application/json",
                                               "buffer": content.encode()})  # fmt: skip
    page.get_by_role("button", name="Upload and validate").click()


@pytest.mark.services
def test_upload_with_a_bad_row_then_a_good_file_and_its_preview(
    page, login, member, celery_worker, uploaded_files, screenshot
):
    login(member)
    rows = [{"question": f"What is {i} + {i}?", "answer": str(2 * i)} for i in range(8)]
    bad = rows[:3] + [{"question": "What is 3 + 3?"}] + rows[4:]
    _upload(page, "sums", _jsonl(bad))
    status = page.locator("#upload-status")
    expect(status).to_have_attribute("data-status", "failed", timeout=60_000)
    expect(page.locator("#upload-errors")).to_have_text(
        "line 4, field answer: required when tool_calls is absent"
    )
    screenshot("dataset-upload-errors")

    _upload(page, "sums", _jsonl(rows))
    expect(page.locator("#upload-status")).to_have_attribute("data-status", "done", timeout=60_000)
    page.locator("#dataset-link").click()
    expect(page.locator("#row-count")).to_have_text("8")
    expect(page.locator("#preview")).to_contain_text("What is 7 + 7?")
    expect(page.locator("#statistics")).to_contain_text("prompt")
    page.get_by_role("button", name="Eval").click()
    expect(page.locator("#rows")).to_contain_text("of the eval split of v1")
    screenshot("dataset-detail")
    page.goto("/datasets/")
    expect(page.locator("#dataset-list")).to_contain_text("sums")
    screenshot("dataset-list")


def test_create_a_tool_schema_from_a_preset_and_try_it(page, login, member, screenshot):
    login(member)
    page.goto("/tools/new/?preset=calculator")
    expect(page.get_by_label("Name", exact=True)).to_have_value("calculator")
    page.get_by_role("button", name="Save").click()
    expect(page.locator("#spec")).to_contain_text('"name": "calculator"')
    page.get_by_label("Arguments (JSON)").fill('{"expression": "(3 + 4) * 6"}')
    page.get_by_role("button", name="Run calculator").click()
    expect(page.locator("#try-outcome")).to_contain_text("42")
    screenshot("toolschema-try")
    page.get_by_label("Arguments (JSON)").fill('{"expression": 42}')
    page.get_by_role("button", name="Run calculator").click()
    expect(page.locator("#try-outcome")).to_contain_text("42 is not of type 'string'")


def test_create_a_template_and_see_its_live_preview(page, login, admin, team, screenshot):
    seed_demo_catalog(team=team, user=admin)
    login(admin)
    page.goto("/templates/new/?preset=torl")
    expect(page.locator("#token-count")).not_to_be_empty(
        timeout=30_000
    )  # rendered on load; builds the tokenizer
    page.get_by_label("Name", exact=True).fill("My ToRL")
    page.locator("#id_dataset").select_option(index=1)
    page.locator("#id_row_index").fill("2")
    page.locator("#id_row_index").dispatch_event("change")
    expect(page.locator("#rendered-prompt")).to_contain_text("What is")
    page.locator("#id_source").fill("Solve: {{ question }}\n{{ ''.__class__.__mro__ }}")
    expect(page.locator("#preview-error")).to_contain_text("forbidden operation")
    page.locator("#id_source").fill("Solve: {{ question }}\nTools: {{ tool_names|join(', ') }}")
    expect(page.locator("#rendered-prompt")).to_contain_text("Solve: What is")
    page.get_by_role("button", name="Save").click()
    expect(page.locator("#template-source")).to_contain_text("Solve: {{ question }}")
    page.locator("#id_dataset").select_option(index=1)
    page.locator("#id_tools").select_option(label="calculator (calculator) v1")
    expect(page.locator("#rendered-prompt")).to_contain_text("Tools: calculator")
    expect(page.locator("#rendered-prompt")).to_contain_text("Solve: What is")
    screenshot("template-preview")


def test_test_a_reward_definition_on_a_sample(page, login, admin, team, screenshot):
    seed_demo_catalog(team=team, user=admin)
    login(admin)
    page.goto("/rewards/")
    page.get_by_role("link", name="Correctness + format").click()
    page.get_by_label("Model output").fill("<think>17 * 3 is 51.</think> The answer is \\boxed{51}.")
    page.get_by_label("Ground-truth answer").fill("51")
    page.get_by_role("button", name="Score").click()
    expect(page.locator("#score-total")).to_have_text("1.5")
    screenshot("reward-test")
