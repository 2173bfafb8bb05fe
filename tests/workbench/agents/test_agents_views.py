import pytest

from workbench.agents import services
from workbench.agents.models import AgentProgramVersion

PROGRAM = "def run(task, client):\n    return None\n"
XSS = "<script>alert(1)</script>"


@pytest.fixture
def program(team, member):
    return services.agent_program_create(team=team, user=member, name="echo", source=PROGRAM).item


def test_create_form_shows_the_syntax_error_and_saves_nothing(client_for, member):
    data = {"name": "broken", "source": "def run(task, client)\n    pass\n"}
    response = client_for(member).post("/agents/new/", data)
    assert response.status_code == 200
    assert "agent_program.py: line 1: expected &#x27;:&#x27;" in response.content.decode()
    assert not AgentProgramVersion.objects.exists()


def test_create_then_edit_saves_versions(client_for, member):
    client = client_for(member)
    response = client.post("/agents/new/", {"name": "echo", "source": PROGRAM, "description": "d"})
    version = AgentProgramVersion.objects.get()
    assert response.status_code == 302 and response.url == version.item.get_absolute_url()
    edited = PROGRAM.replace("None", "{}")
    assert client.post(f"/agents/{version.item.pk}/edit/", {"source": edited}).status_code == 302
    assert list(version.item.versions.values_list("number", "source")) == [(2, edited), (1, PROGRAM)]
    history = client.get(version.item.get_history_url()).content.decode()
    assert "v2" in history and version.item.get_diff_url(1, 2) in history


def test_pages_escape_the_source_and_list_the_item(client_for, team, member):
    item = services.agent_program_create(
        team=team, user=member, name=XSS, source=f"# {XSS}\n{PROGRAM}", description=XSS
    ).item
    client = client_for(member)
    for url in ("/agents/", item.get_absolute_url(), f"/agents/{item.pk}/edit/", item.get_history_url()):
        body = client.get(url).content.decode()
        assert "<script>alert(1)" not in body and "&lt;script&gt;alert(1)&lt;/script&gt;" in body, url
    assert 'href="/agents/" aria-current="page"' in client.get("/agents/").content.decode()


def test_viewer_reads_but_cannot_write(client_for, viewer, program):
    client = client_for(viewer)
    assert client.get(program.get_absolute_url()).status_code == 200
    assert client.get("/agents/new/").status_code == 403
    assert client.get(f"/agents/{program.pk}/edit/").status_code == 403


def test_other_team_gets_404_by_url_and_api(client_for, outsider, program):
    client = client_for(outsider)
    for url in (program.get_absolute_url(), f"/agents/api/{program.pk}/", program.get_history_url()):
        assert client.get(url).status_code == 404, url
    assert client.get("/agents/api/").json() == {"agent_programs": []}


def test_api_detail(client_for, member, program):
    body = client_for(member).get(f"/agents/api/{program.pk}/").json()
    assert (body["name"], body["source"], body["version"]) == ("echo", PROGRAM, 1)
