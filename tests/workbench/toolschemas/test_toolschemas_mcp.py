"""MCP tools in the catalog, against a real MCP server (the official SDK over streamable HTTP): the servers
a team may use, importing tools as tool schemas with their input schema pinned, name clashes, a server
that is down, edits that keep the pins, and "try it" under the team rule."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from django.core.exceptions import ValidationError

from tests.support.mcp_processes import HttpMcpServer, http_mcp_server, servers_setting, stdio_command
from trainers.workbench_api import mcp_schema_hash
from workbench.toolschemas import mcp, services
from workbench.toolschemas.models import ToolSchema, ToolSchemaVersion
from workbench.toolschemas.selectors import mcp_server_get, mcp_servers_for
from workbench.toolschemas.services import ToolSchemaContent

DOWN = {"url": "http://127.0.0.1:9/mcp", "connect_timeout_s": 2}


@pytest.fixture(scope="module")
def server() -> Iterator[HttpMcpServer]:
    with http_mcp_server() as running:
        yield running


@pytest.fixture(autouse=True)
def listed(server: HttpMcpServer, settings) -> None:
    """`web` is open to alpha (the `team` fixture), `theirs` to beta only, `down` to every team."""
    settings.WORKBENCH_MCP_SERVERS = servers_setting(
        web={"url": server.url, "teams": ["alpha"]}, theirs={"url": server.url, "teams": ["beta"]}, down=DOWN
    )


def imported(team, user, *names: str, prefix: str = "", server: str = "web") -> list[ToolSchemaVersion]:
    return mcp.mcp_tools_import(
        team=team, user=user, server=mcp_server_get(team=team, name=server), names=names, prefix=prefix
    )


def test_a_team_sees_the_servers_open_to_it(team, other_team):
    assert [s.name for s in mcp_servers_for(team=team)] == ["down", "web"]
    assert [s.name for s in mcp_servers_for(team=other_team)] == ["down", "theirs"]
    assert mcp_servers_for(team=team)[1].transport == "http"


def test_the_listing_has_each_tools_name_description_and_schema(team):
    tools = {t.name: t for t in mcp.mcp_tools_list(mcp_server_get(team=team, name="web"))}
    assert tools["add"].description == "Add two integers."
    assert set(tools["add"].input_schema["required"]) == {"a", "b"}


def test_a_stdio_server_is_listed_and_imported_from_too(team, member, settings):
    settings.WORKBENCH_MCP_SERVERS = servers_setting(local={"command": stdio_command()})
    (local,) = mcp_servers_for(team=team)
    assert local.transport == "stdio" and "tests.support.mcp_server" in local.address
    (echo,) = imported(team, member, "echo", server="local")
    assert (echo.mcp_server, echo.mcp_tool) == ("local", "echo")
    result = services.tool_schema_try(version=echo, arguments_text='{"text": "hi"}')
    assert result.ok and result.output.splitlines()[0] == "hi"


def test_import_pins_the_server_the_tool_and_the_schema(team, member):
    add, echo = imported(team, member, "add", "echo")
    assert [add.item.name, echo.item.name] == ["add", "echo"]
    assert add.implementation == "mcp" and add.function_name == "add"
    assert (add.mcp_server, add.mcp_tool) == ("web", "add")
    assert add.schema_hash == mcp_schema_hash(add.parameters)
    assert add.binding() == {
        "name": "mcp",
        "config": {
            "server": "web",
            "tool": "add",
            "name": "add",
            "description": "Add two integers.",
            "parameters": add.parameters,
            "schema_hash": add.schema_hash,
            "timeout_s": 30.0,
        },
    }
    assert f'"schema_hash": "{add.schema_hash}"' in add.canonical_text()


def test_a_name_the_catalog_has_is_refused_until_a_prefix_is_given(team, member):
    http = ToolSchemaContent("add", "Adds.", {"type": "object"}, "http", url="https://adder.example/")
    services.tool_schema_create(team=team, user=member, name="add", content=http)
    with pytest.raises(ValidationError) as caught:
        imported(team, member, "add", "echo")
    assert caught.value.messages == [
        "add: the catalog already has a tool schema named 'add'; import with a name prefix, or rename it"
    ]
    assert ToolSchema.objects.count() == 1  # all or nothing: echo was not imported either
    add, echo = imported(team, member, "add", "echo", prefix="web_")
    assert (add.item.name, add.function_name, add.mcp_tool) == ("web_add", "web_add", "add")
    assert echo.item.name == "web_echo"


def test_importing_again_makes_a_new_version_only_when_the_server_changed_the_tool(team, member, settings):
    with http_mcp_server() as changing:
        settings.WORKBENCH_MCP_SERVERS = servers_setting(web={"url": changing.url})
        (first,) = imported(team, member, "add")
        assert imported(team, member, "add") == [first]
        changing.restart(variant=2)
        (second,) = imported(team, member, "add")
    assert (second.item, second.number) == (first.item, 2)
    assert "c" in second.parameters["properties"] and second.description == "Add three integers."
    assert second.schema_hash == mcp_schema_hash(second.parameters) != first.schema_hash


def test_a_tool_the_server_does_not_offer_is_named(team, member):
    with pytest.raises(ValidationError) as caught:
        imported(team, member, "add", "nope")
    assert caught.value.messages == ["nope: the server 'web' does not offer this tool"]


def test_a_server_that_is_down_says_so(team, member):
    with pytest.raises(mcp.McpUnavailable, match="MCP server 'down' is unreachable"):
        imported(team, member, "add", server="down")


def test_an_edit_keeps_the_pins(team, member):
    (add,) = imported(team, member, "add")
    kept = services.tool_schema_update(
        item=add.item, user=member, content=ToolSchemaContent.of(add, description="Sums.", timeout_s=5.0)
    )
    assert (kept.description, kept.timeout_s, kept.schema_hash) == ("Sums.", 5.0, add.schema_hash)
    for changes in ({"parameters": {"type": "object"}}, {"mcp_tool": "echo"}, {"implementation": "builtin"}):
        with pytest.raises(ValidationError, match="import it again"):
            services.tool_schema_update(
                item=add.item, user=member, content=ToolSchemaContent.of(add, **changes)
            )


def test_no_tool_becomes_an_mcp_tool_by_an_edit(team, member):
    http = ToolSchemaContent("add", "Adds.", {"type": "object"}, "http", url="https://adder.example/")
    version = services.tool_schema_create(team=team, user=member, name="add", content=http)
    schema = {"type": "object"}
    hand_made = ToolSchemaContent.of(
        version, implementation="mcp", mcp_server="web", mcp_tool="add", schema_hash=mcp_schema_hash(schema)
    )
    with pytest.raises(ValidationError) as caught:
        services.tool_schema_update(item=version.item, user=member, content=hand_made)
    assert caught.value.message_dict == {
        "implementation": ["MCP tools are imported from their server, not edited in."]
    }


def test_try_it_calls_the_servers_tool(team, member):
    (add,) = imported(team, member, "add")
    result = services.tool_schema_try(version=add, arguments_text='{"a": 2, "b": 40}')
    assert result.ok, result.error
    assert result.output.splitlines()[0] == "42"
    refused = services.tool_schema_try(version=add, arguments_text='{"a": "two", "b": 40}')
    assert not refused.ok and "do not match the schema" in refused.error


def test_try_it_holds_the_team_rule(team, member, other_team, outsider, settings):
    """A version pinned to a server the operator closed to its team (or no longer lists) is not called."""
    (add,) = imported(team, member, "add")
    settings.WORKBENCH_MCP_SERVERS = servers_setting(web={"url": "http://127.0.0.1:9/mcp", "teams": ["beta"]})
    result = services.tool_schema_try(version=add, arguments_text='{"a": 2, "b": 40}')
    assert not result.ok
    assert "no MCP server named 'web' is registered for this team" in result.error


def test_a_malformed_server_list_is_an_error_of_try_it_not_a_crash(team, member, settings):
    (add,) = imported(team, member, "add")
    settings.WORKBENCH_MCP_SERVERS = "[{"
    result = services.tool_schema_try(version=add, arguments_text='{"a": 2, "b": 40}')
    assert not result.ok and "WORKBENCH_MCP_SERVERS: not JSON" in result.error


# The import page -----------------------------------------------------------------------------------


def test_the_page_lists_the_teams_servers(client_for, member):
    body = client_for(member).get("/tools/import-mcp/").content.decode()
    assert "?server=web" in body and "?server=down" in body and "theirs" not in body
    assert "Import from an MCP server" in client_for(member).get("/tools/").content.decode()


def test_the_page_shows_a_servers_tools_and_imports_the_checked_ones(client_for, member):
    client = client_for(member)
    body = client.get("/tools/import-mcp/?server=web").content.decode()
    assert 'value="add"' in body and "Add two integers." in body and "&quot;required&quot;" in body
    response = client.post("/tools/import-mcp/", {"server": "web", "tools": ["add", "echo"], "prefix": ""})
    assert response.status_code == 302 and response["Location"] == "/tools/"
    assert sorted(ToolSchema.objects.values_list("name", flat=True)) == ["add", "echo"]
    again = client.post("/tools/import-mcp/", {"server": "web", "tools": ["add"], "prefix": "bad prefix!"})
    assert "Use up to 32 letters, digits, underscores or hyphens." in again.content.decode()


def test_the_page_names_a_clash(client_for, member, team):
    imported(team, member, "add")
    services.tool_schema_create(
        team=team,
        user=member,
        name="echo",
        content=ToolSchemaContent("echo", "Echo.", {"type": "object"}, "http", url="https://e.example/"),
    )
    response = client_for(member).post("/tools/import-mcp/", {"server": "web", "tools": ["echo"]})
    assert response.status_code == 200
    assert "the catalog already has a tool schema named &#x27;echo&#x27;" in response.content.decode()


def test_a_server_that_is_down_is_a_message_on_the_page(client_for, member):
    response = client_for(member).get("/tools/import-mcp/?server=down")
    assert response.status_code == 200
    assert "Cannot list the tools." in response.content.decode()
    assert "MCP server &#x27;down&#x27; is unreachable" in response.content.decode()


def test_a_malformed_server_list_is_a_message_on_the_page(client_for, member, settings):
    settings.WORKBENCH_MCP_SERVERS = '[{"name": "x"}]'
    response = client_for(member).get("/tools/import-mcp/")
    assert response.status_code == 200 and "exactly one of url" in response.content.decode()


def test_another_teams_server_is_not_found_and_viewers_cannot_import(client_for, member, viewer):
    assert client_for(member).get("/tools/import-mcp/?server=theirs").status_code == 404
    assert (
        client_for(member).post("/tools/import-mcp/", {"server": "theirs", "tools": ["add"]}).status_code
        == 404
    )
    assert client_for(viewer).get("/tools/import-mcp/").status_code == 403


def test_the_edit_page_of_an_mcp_tool_changes_only_description_and_timeout(client_for, member, team):
    (add,) = imported(team, member, "add")
    client = client_for(member)
    page = client.get(f"/tools/{add.item.pk}/edit/").content.decode()
    assert 'id="mcp-pins"' in page and 'name="parameters"' not in page and 'name="implementation"' not in page
    data = {"description": "Sums two.", "timeout_s": "4", "note": "", "implementation": "builtin"}
    assert client.post(f"/tools/{add.item.pk}/edit/", data).status_code == 302
    latest = add.item.latest_version()
    assert (latest.number, latest.description, latest.implementation) == (2, "Sums two.", "mcp")
    assert latest.schema_hash == add.schema_hash
