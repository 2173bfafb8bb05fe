import json
import socket

import pytest

from trainers.workbench_api import EGRESS_ERROR
from workbench.toolschemas import services
from workbench.toolschemas.models import ToolSchema, ToolSchemaVersion
from workbench.toolschemas.services import ToolSchemaContent

XSS = "<script>alert(1)</script><b>bold</b>"
ESCAPED = "&lt;script&gt;alert(1)&lt;/script&gt;&lt;b&gt;bold&lt;/b&gt;"
CALC = services.builtin_spec("calculator")


@pytest.fixture
def calc(team, member):
    content = ToolSchemaContent(
        "calculator", CALC["description"], CALC["parameters"], "builtin", "calculator"
    )
    return services.tool_schema_create(team=team, user=member, name="calc", content=content).item


def _form(**overrides):
    data = {
        "name": "calc",
        "function_name": "calculator",
        "description": CALC["description"],
        "parameters": json.dumps(CALC["parameters"]),
        "implementation": "builtin",
        "builtin": "calculator",
        "url": "",
        "timeout_s": "2",
        "note": "",
    }
    return {**data, **overrides}


def test_create_through_the_form(client_for, member):
    response = client_for(member).post("/tools/new/", _form())
    item = ToolSchema.objects.get(name="calc")
    assert response.status_code == 302 and response["Location"] == item.get_absolute_url()


def test_form_shows_schema_and_duplicate_errors(client_for, member, calc):
    client = client_for(member)
    bad = client.post("/tools/new/", _form(name="other", parameters='{"type": "object", "required": 3}'))
    assert "not a valid JSON Schema at required" in bad.content.decode()
    duplicate = client.post("/tools/new/", _form())
    assert "This team already has one with that name." in duplicate.content.decode()
    assert ToolSchemaVersion.objects.count() == 1


def test_preset_fills_the_form_from_the_builtin(client_for, member):
    body = client_for(member).get("/tools/new/?preset=python").content.decode()
    assert "Run Python code" in body and "&quot;code&quot;" in body


def test_edit_creates_a_new_version(client_for, member, calc):
    response = client_for(member).post(f"/tools/{calc.pk}/edit/", _form(description="Adds.", note="v2"))
    assert response.status_code == 302
    assert list(calc.versions.values_list("number", "description")) == [
        (2, "Adds."),
        (1, CALC["description"]),
    ]


def test_try_it_partial(client_for, member, calc):
    response = client_for(member).post(
        f"/tools/{calc.pk}/v/1/try/", {"arguments": '{"expression": "2 ** 10"}'}
    )
    body = response.content.decode()
    assert 'class="ok"' in body and "1024" in body


def test_try_it_refuses_a_loopback_endpoint(client_for, team, member, settings):
    settings.WORKBENCH_EGRESS_ALLOW = []
    with socket.socket() as listener:  # a live port: a connection would wait in its accept queue
        listener.bind(("127.0.0.1", 0))
        listener.listen()
        url = f"http://127.0.0.1:{listener.getsockname()[1]}/"
        content = ToolSchemaContent("doubler", "Doubles n.", {"type": "object"}, "http", url=url)
        item = services.tool_schema_create(team=team, user=member, name="d", content=content).item
        body = client_for(member).post(f"/tools/{item.pk}/v/1/try/", {"arguments": "{}"}).content.decode()
        assert 'class="ok"' not in body and f"doubler: {EGRESS_ERROR}" in body
        listener.setblocking(False)
        with pytest.raises(BlockingIOError):
            listener.accept()


def test_user_text_is_escaped_everywhere(client_for, team, member):
    content = ToolSchemaContent(
        "xss_tool", XSS, {"type": "object", "description": XSS}, "http", url="https://example.org/x?q=<b>"
    )
    item = services.tool_schema_create(team=team, user=member, name=XSS, content=content, note=XSS).item
    client = client_for(member)
    for url in ("/tools/", item.get_absolute_url(), item.get_history_url()):
        body = client.get(url).content.decode()
        assert "<script>alert(1)" not in body and "<b>bold" not in body, url
        assert ESCAPED in body, url


def test_viewer_reads_but_cannot_write_or_run(client_for, viewer, calc):
    client = client_for(viewer)
    assert client.get(calc.get_absolute_url()).status_code == 200
    assert client.get("/tools/new/").status_code == 403
    assert client.post(f"/tools/{calc.pk}/edit/", _form()).status_code == 403
    assert client.post(f"/tools/{calc.pk}/v/1/try/", {"arguments": "{}"}).status_code == 403


def test_other_team_gets_404_by_url_and_api(client_for, outsider, calc):
    client = client_for(outsider)
    for url in (
        calc.get_absolute_url(),
        f"/tools/{calc.pk}/edit/",
        f"/tools/api/{calc.pk}/",
        calc.get_history_url(),
    ):
        assert client.get(url).status_code == 404, url
    assert client.post(f"/tools/{calc.pk}/v/1/try/", {"arguments": "{}"}).status_code == 404
    assert client.get("/tools/api/").json() == {"tool_schemas": []}
    assert f"/tools/{calc.pk}/" not in client.get("/tools/").content.decode()


def test_api_lists_and_details_own_team(client_for, member, calc):
    client = client_for(member)
    assert client.get("/tools/api/").json()["tool_schemas"][0]["name"] == "calc"
    detail = client.get(f"/tools/api/{calc.pk}/").json()
    assert detail["spec"]["function"]["name"] == "calculator" and detail["binding"]["name"] == "calculator"
