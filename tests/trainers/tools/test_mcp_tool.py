"""MCP tools against a real server (the official SDK), over streamable HTTP and over stdio: listing,
calls, schema validation before any round trip, and every fault as an observation, never a raise."""

from __future__ import annotations

import asyncio
from collections.abc import Iterator

import pytest

from tests.support.mcp_processes import HttpMcpServer, http_mcp_server, servers_setting, stdio_command
from trainers.mcp import POOL, McpServerError, schema_hash, server_for
from trainers.mcp.servers import SERVERS_ENV, parse_servers
from trainers.metrics import keys
from trainers.metrics.step_metrics import server_error_metrics
from trainers.tools.mcp import McpTool

pytestmark = pytest.mark.slow  # each module starts server processes

ADD_SCHEMA = {
    "type": "object",
    "properties": {"a": {"type": "integer"}, "b": {"type": "integer"}},
    "required": ["a", "b"],
}


@pytest.fixture(scope="module")
def http_server() -> Iterator[HttpMcpServer]:
    with http_mcp_server() as server:
        yield server


@pytest.fixture(autouse=True)
def listed(http_server: HttpMcpServer, monkeypatch: pytest.MonkeyPatch) -> None:
    """The operator lists the HTTP server (for Research only) and the stdio server (for every team)."""
    setting = servers_setting(
        web={"url": http_server.url, "teams": ["Research"]}, local={"command": stdio_command()}
    )
    monkeypatch.setenv(SERVERS_ENV, setting)


def call(tool: McpTool, arguments: dict):
    async def run():
        try:
            return await tool.invoke(arguments)
        finally:
            await tool.close()

    return asyncio.run(run())


def add_tool(server: str = "web", **config) -> McpTool:
    return McpTool(server=server, tool="add", parameters=ADD_SCHEMA, team="Research", **config)


@pytest.mark.parametrize("server", ["web", "local"])
def test_lists_the_servers_tools_with_their_schemas(server: str) -> None:
    tools = {t.name: t for t in asyncio.run(POOL.list_tools(server_for(server)))}
    assert {"add", "echo", "slow", "big", "fails", "crash"} <= set(tools)
    assert tools["add"].description == "Add two integers."
    assert set(tools["add"].input_schema["required"]) == {"a", "b"}


@pytest.mark.parametrize("server", ["web", "local"])
def test_a_call_returns_the_servers_answer(server: str) -> None:
    result = call(add_tool(server), {"a": 2, "b": 40})
    assert result.ok, result.error
    assert result.output.splitlines()[0] == "42"
    assert (result.server, result.server_error) == (server, False)


def test_sessions_are_reused_across_event_loops() -> None:
    """Each rollout step runs its own event loop; the process keeps one session per server."""
    first = call(add_tool(), {"a": 1, "b": 1})
    session = POOL._sessions["web"].session
    second = call(add_tool(), {"a": 2, "b": 2})
    assert first.ok and second.ok
    assert POOL._sessions["web"].session is session


def test_calls_of_one_turn_run_concurrently() -> None:
    """Ten calls that each sleep 1 s finish together, far sooner than one after another (10 s)."""
    tool = McpTool(server="web", tool="slow", parameters={"type": "object"}, team="Research")

    async def ten():
        return await asyncio.gather(*(tool.invoke({"seconds": 1.0}) for _ in range(10)))

    results = asyncio.run(ten())
    assert all(r.ok for r in results)
    assert max(r.latency_s for r in results) < 5.0  # structural: concurrent, not 10 x 1 s


def test_arguments_that_fail_the_schema_never_reach_the_server() -> None:
    result = call(add_tool(server="web"), {"a": "two", "b": 1})
    assert not result.ok
    assert result.error.startswith("invalid arguments for add at a:")
    assert not result.server_error


def test_is_error_results_are_tool_errors_counted_for_the_server() -> None:
    tool = McpTool(server="web", tool="fails", parameters={"type": "object"}, team="Research")
    result = call(tool, {})
    assert not result.ok
    assert "the tool failed on purpose" in result.error
    assert result.server_error


def test_a_slow_server_times_out_and_the_session_stays_usable() -> None:
    tool = McpTool(server="web", tool="slow", parameters={"type": "object"}, team="Research", timeout_s=0.5)
    result = call(tool, {"seconds": 5})
    assert not result.ok and result.server_error
    assert "0.5" in result.error
    assert call(add_tool(), {"a": 1, "b": 2}).ok


def test_a_huge_reply_is_cut_with_a_notice() -> None:
    tool = McpTool(server="web", tool="big", parameters={"type": "object"}, team="Research", max_chars=100)
    result = call(tool, {"n": 10_000_000})
    assert result.ok
    assert result.output.startswith("x" * 100 + "\n[truncated:")
    assert len(result.output) < 200


@pytest.mark.parametrize("server", ["web", "local"])
def test_malformed_json_rpc_is_a_tool_error(server: str) -> None:
    tool = McpTool(server=server, tool="garbage", parameters={"type": "object"}, team="Research", timeout_s=2)
    result = call(tool, {})
    assert not result.ok and result.server_error
    assert call(add_tool(server), {"a": 1, "b": 2}).ok  # the next call gets an answer


@pytest.mark.parametrize("server", ["web", "local"])
def test_a_server_that_dies_mid_call_is_a_tool_error(server: str, http_server: HttpMcpServer) -> None:
    tool = McpTool(server=server, tool="crash", parameters={"type": "object"}, team="Research", timeout_s=5)
    result = call(tool, {})
    assert not result.ok and result.server_error
    if server == "web":
        http_server.restart()
    # the stdio server is started again by the next call's new session; the HTTP one by its operator
    assert call(add_tool(server), {"a": 3, "b": 4}).output.startswith("7")


def test_a_restarted_http_server_gets_a_new_session_without_a_failed_call(http_server: HttpMcpServer) -> None:
    assert call(add_tool(), {"a": 1, "b": 1}).ok
    http_server.restart()
    assert call(add_tool(), {"a": 5, "b": 5}).output.startswith("10")


def test_a_server_that_is_down_is_a_tool_error(monkeypatch: pytest.MonkeyPatch) -> None:
    down = {"url": "http://127.0.0.1:9/mcp", "connect_timeout_s": 2}
    monkeypatch.setenv(SERVERS_ENV, servers_setting(web=down))
    result = call(McpTool(server="web", tool="add", parameters=ADD_SCHEMA), {"a": 1, "b": 2})
    assert not result.ok and result.server_error
    assert result.error.startswith("add: MCP server 'web'")


def test_stdio_servers_start_with_a_clean_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("DATABASE_URL", "postgres://secret@db/workbench")
    monkeypatch.setenv("DJANGO_SECRET_KEY", "not-for-tools")
    asyncio.run(POOL.close())  # a fresh process, started under these variables
    tool = McpTool(server="local", tool="env", parameters={"type": "object"})
    assert call(tool, {"name": "DATABASE_URL"}).output.startswith("<unset>")
    assert call(tool, {"name": "DJANGO_SECRET_KEY"}).output.startswith("<unset>")
    assert call(tool, {"name": "PATH"}).output != "<unset>"


def test_a_team_cannot_use_a_server_the_operator_did_not_open_to_it() -> None:
    with pytest.raises(McpServerError, match="no MCP server named 'web'"):
        server_for("web", "Other team")
    tool = McpTool(server="web", tool="add", parameters=ADD_SCHEMA, team="Other team")
    result = call(tool, {"a": 1, "b": 2})
    assert not result.ok
    assert "registered: local" in result.error


def test_unlisted_servers_are_unknown() -> None:
    result = call(McpTool(server="nope", tool="add", parameters=ADD_SCHEMA), {"a": 1, "b": 2})
    assert not result.ok and "no MCP server named 'nope'" in result.error


def test_server_errors_are_counted_per_server() -> None:
    results = [
        call(add_tool(), {"a": 1, "b": 1}),
        call(McpTool(server="web", tool="fails", parameters={"type": "object"}, team="Research"), {}),
        call(add_tool("local"), {"a": 1, "b": 1}),
    ]
    metrics = server_error_metrics(results)
    assert metrics == {
        keys.server_errors_key("local"): 0.0,
        keys.server_errors_key("web"): 1.0,
        keys.TOOL_SERVER_ERRORS: 1.0,
    }


@pytest.mark.parametrize(
    ("setting", "message"),
    [
        ("[{", "not JSON"),
        ('{"name": "x"}', "must be a JSON list"),
        ('[{"name": "x"}]', "exactly one of url"),
        ('[{"name": "x", "url": "ftp://h/"}]', "url"),
        ('[{"name": "x", "url": "http://h/", "command": ["y"]}]', "exactly one of url"),
        ('[{"name": "x", "command": ["a"]}, {"name": "x", "command": ["b"]}]', "two servers are named"),
    ],
)
def test_a_malformed_server_list_is_refused_with_its_reason(setting: str, message: str) -> None:
    with pytest.raises(McpServerError, match=message):
        parse_servers(setting)


def test_the_schema_hash_ignores_key_order() -> None:
    assert schema_hash({"a": 1, "b": [1, 2]}) == schema_hash({"b": [1, 2], "a": 1})
    assert schema_hash({"a": 1}) != schema_hash({"a": 2})


@pytest.mark.parametrize("server", ["web", "local"])
def test_concurrent_first_calls_share_one_new_session(server: str) -> None:
    """A rollout's first turn calls the server from every trajectory at once, before any session is open."""
    asyncio.run(POOL.close())

    async def burst():
        return await asyncio.gather(*(add_tool(server).invoke({"a": i, "b": 1}) for i in range(16)))

    results = asyncio.run(burst())
    assert [r.output.splitlines()[0] for r in results] == [str(i + 1) for i in range(16)]


def test_calls_waiting_on_a_server_that_cannot_be_reached_fail_together(monkeypatch) -> None:
    down = {"command": ["/nonexistent/mcp-server"], "connect_timeout_s": 2}
    monkeypatch.setenv(SERVERS_ENV, servers_setting(web=down))

    async def burst():
        return await asyncio.gather(*(add_tool().invoke({"a": 1, "b": 1}) for _ in range(8)))

    results = asyncio.run(burst())
    assert all(not r.ok and r.server_error and "unreachable" in r.error for r in results)
    assert max(r.latency_s for r in results) < 2.0  # one failed start, not eight in turn
