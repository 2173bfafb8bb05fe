import json

import pytest
from django.core.files.uploadedfile import SimpleUploadedFile

from workbench.datasets import services as dataset_services
from workbench.prompts import services
from workbench.prompts.models import PromptTemplateVersion
from workbench.toolschemas import services as tool_services

XSS = "<script>alert(1)</script><b>bold</b>"
ESCAPED = "&lt;script&gt;alert(1)&lt;/script&gt;&lt;b&gt;bold&lt;/b&gt;"
SOURCE = "Q: {{ question }}{% if observation %} S: {{ observation }}{% endif %} T: {{ tool_names|join(',') }}"


@pytest.fixture(autouse=True)
def media_root(settings, tmp_path):
    settings.MEDIA_ROOT = tmp_path


@pytest.fixture
def template(team, member):
    return services.prompt_template_create(
        team=team, user=member, name="t", family="qwen_tool", source=SOURCE
    ).item


def _dataset(team, user, name="arith"):
    rows = [{"question": "What is 3 * 4?", "answer": "12", "initial_state": {"grid": "S.G"}}]
    file = SimpleUploadedFile("d.jsonl", "".join(json.dumps(r) + "\n" for r in rows).encode())
    upload = dataset_services.dataset_upload_create(team=team, user=user, name=name, file=file)
    return dataset_services.dataset_upload_process(upload_id=upload.pk).version


def _tool(team, user):
    spec = tool_services.builtin_spec("calculator")
    content = tool_services.ToolSchemaContent(
        "calculator", spec["description"], spec["parameters"], "builtin", "calculator"
    )
    return tool_services.tool_schema_create(team=team, user=user, name="calc", content=content)


def test_preview_with_a_dataset_row_and_a_tool(client_for, team, member):
    dataset, tool = _dataset(team, member), _tool(team, member)
    form = {
        "family": "qwen_tool",
        "source": SOURCE,
        "dataset": dataset.pk,
        "row_index": 0,
        "tools": [tool.pk],
    }
    body = client_for(member).post("/templates/preview/", {**form, "tokenizer": "tiny"}).content.decode()
    assert "Q: What is 3 * 4? S: {&quot;grid&quot;: &quot;S.G&quot;} T: calculator" in body
    assert 'id="token-count">' in body


def test_preview_shows_the_sandbox_error(client_for, member):
    form = {"family": "qwen_tool", "source": "{{ ''.__class__.__mro__ }}", "tokenizer": "tiny"}
    body = client_for(member).post("/templates/preview/", form).content.decode()
    assert "template uses a forbidden operation: access to attribute &#x27;__class__&#x27;" in body


def test_preview_refuses_another_teams_dataset_and_tools(client_for, team, member, other_team, outsider):
    theirs, their_tool = _dataset(other_team, outsider, name="theirs"), _tool(other_team, outsider)
    form = {
        "family": "qwen_tool",
        "source": SOURCE,
        "dataset": theirs.pk,
        "tools": [their_tool.pk],
        "tokenizer": "tiny",
    }
    body = client_for(member).post("/templates/preview/", form).content.decode()
    assert "Select a valid choice" in body and "What is 3 * 4?" not in body


def test_create_form_shows_the_line_of_a_syntax_error(client_for, member):
    data = {"name": "bad", "family": "qwen_tool", "source": "ok\n{% for %}", "description": "", "note": ""}
    body = client_for(member).post("/templates/new/", data).content.decode()
    assert "template syntax error on line 2" in body
    assert not PromptTemplateVersion.objects.exists()


def test_preset_and_edit(client_for, member, template):
    client = client_for(member)
    assert "&lt;tool_call&gt;" in client.get("/templates/new/?preset=qwen_tool").content.decode()
    data = {"family": "torl", "source": "{{ question }}", "description": "", "note": "to ToRL"}
    assert client.post(f"/templates/{template.pk}/edit/", data).status_code == 302
    assert list(template.versions.values_list("number", "family")) == [(2, "torl"), (1, "qwen_tool")]


def test_user_text_is_escaped_everywhere(client_for, team, member):
    source = XSS + "{{ question }}"
    item = services.prompt_template_create(
        team=team, user=member, name=XSS, family="qwen_tool", source=source, description=XSS, note=XSS
    ).item
    client = client_for(member)
    for url in (
        "/templates/",
        item.get_absolute_url(),
        item.get_history_url(),
        f"/templates/{item.pk}/edit/",
    ):
        body = client.get(url).content.decode()
        assert "<script>alert(1)" not in body and "<b>bold" not in body, url
        assert ESCAPED in body, url
    form = {"family": "qwen_tool", "source": source, "question": XSS, "tokenizer": "tiny"}
    preview = client.post("/templates/preview/", form).content.decode()
    assert "<script>alert(1)" not in preview and ESCAPED + ESCAPED in preview


def test_viewer_reads_but_cannot_write(client_for, viewer, template):
    client = client_for(viewer)
    assert client.get(template.get_absolute_url()).status_code == 200
    assert client.get("/templates/new/").status_code == 403
    assert client.get(f"/templates/{template.pk}/edit/").status_code == 403


def test_other_team_gets_404_by_url_and_api(client_for, outsider, template):
    client = client_for(outsider)
    for url in (
        template.get_absolute_url(),
        f"/templates/{template.pk}/edit/",
        f"/templates/api/{template.pk}/",
    ):
        assert client.get(url).status_code == 404, url
    assert client.get("/templates/api/").json() == {"prompt_templates": []}


def test_api_detail(client_for, member, template):
    body = client_for(member).get(f"/templates/api/{template.pk}/").json()
    assert (body["family"], body["source"], body["version"]) == ("qwen_tool", SOURCE, 1)
