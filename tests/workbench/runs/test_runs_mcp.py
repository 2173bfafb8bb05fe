"""Runs with MCP tools, against a real MCP server: the launch check asks the server for its tools (refused
when it is down, no longer offers a tool, or changed a tool's input schema since import), and the operator
bounds keep a run to the servers open to its team, on the web process, the trainer's worker and the
rollout workers alike (the bound tool carries the run's team, whatever the config said)."""

from __future__ import annotations

import asyncio
from collections.abc import Iterator

import pytest
from django.core.exceptions import ValidationError
from django.urls import reverse

from tests.support.mcp_processes import HttpMcpServer, http_mcp_server, servers_setting
from trainers.config import RunConfig
from trainers.trajectory import ToolCall
from trainers.workbench_api import Toolset
from workbench.runs.config.bounds import OutOfBounds, run_config_bound
from workbench.runs.execution.rollout_job_bounds import RolloutJobRefused, rollout_job_bound
from workbench.runs.models import Run, RunStatus
from workbench.runs.services import run_create, run_create_check
from workbench.runs.telemetry.ingest import trajectories_ingest
from workbench.toolschemas import mcp
from workbench.toolschemas.selectors import mcp_server_get
from workbench.toolschemas.services import operator_context

from .test_runs_rollout_job_bounds import payload

ADD = {"type": "object", "properties": {"a": {"type": "integer"}}}


@pytest.fixture
def server(settings) -> Iterator[HttpMcpServer]:
    """A server of its own (its schema changes in a test): `web` open to alpha, `theirs` to beta only."""
    with http_mcp_server() as running:
        settings.WORKBENCH_MCP_SERVERS = servers_setting(
            web={"url": running.url, "teams": ["alpha"]}, theirs={"url": running.url, "teams": ["beta"]}
        )
        yield running


def binding(server: str = "web", tool: str = "add", **config) -> dict:
    return {"name": "mcp", "config": {"server": server, "tool": tool, "parameters": ADD, **config}}


def tool_errors(team, **kwargs) -> dict[str, list[str]]:
    kwargs.setdefault("config", RunConfig().model_dump(mode="json"))
    errors = run_create_check(team=team, queue="cpu", launch=False, **kwargs)[1]
    return {path: messages for path, messages in errors.items() if path.startswith("tool")}


def test_a_changed_input_schema_refuses_the_launch_naming_the_tool_and_the_change(server, team, member):
    (add,) = mcp.mcp_tools_import(
        team=team, user=member, server=mcp_server_get(team=team, name="web"), names=["add"]
    )
    assert tool_errors(team, tool_versions=[add]) == {}
    server.restart(variant=2)
    now = {t.name: t for t in mcp.mcp_tools_list(mcp_server_get(team=team, name="web"))}["add"].schema_hash
    assert tool_errors(team, tool_versions=[add]) == {
        "tool_versions": [
            "tool schema 'add' (MCP server 'web', tool 'add'): the server's input schema changed since "
            f"import (pinned {add.schema_hash}, now {now}); import it again"
        ]
    }
    with pytest.raises(ValidationError, match="changed since import"):
        run_create(
            team=team, user=member, name="r", config={}, queue="cpu", tool_versions=[add], launch=False
        )
    assert not Run.objects.exists()


def test_a_server_that_is_down_refuses_the_launch(server, team, member):
    (add,) = mcp.mcp_tools_import(
        team=team, user=member, server=mcp_server_get(team=team, name="web"), names=["add"]
    )
    server.stop()
    (message,) = tool_errors(team, tool_versions=[add])["tool_versions"]
    assert message.startswith(
        "tool schema 'add' (MCP server 'web', tool 'add'): the server cannot be reached: MCP server 'web'"
    )


def test_a_tool_the_server_no_longer_offers_refuses_a_configs_own_binding(server, team):
    config = {**RunConfig().model_dump(mode="json"), "tools": [binding(tool="gone", name="gone")]}
    assert tool_errors(team, config=config) == {
        "tools": [
            "tool 'gone' (MCP server 'web', tool 'gone'): the server no longer offers this tool; import "
            "another or remove it from the run"
        ]
    }


def test_another_teams_server_is_out_of_bounds(server, team):
    with pytest.raises(OutOfBounds) as caught:
        run_config_bound({"tools": [binding("theirs")]}, team_id=team.pk)
    assert caught.value.errors == {
        "tools.0.config.server": ["no MCP server 'theirs' is open to this team (WORKBENCH_MCP_SERVERS: web)"]
    }
    config = {**RunConfig().model_dump(mode="json"), "tools": [binding("theirs")]}
    assert tool_errors(team, config=config) == caught.value.errors  # the bounds' error, not repeated


def test_the_bound_tool_carries_the_runs_team_whatever_the_config_said(server, team):
    (tool,) = run_config_bound({"tools": [binding(team="beta")]}, team_id=team.pk)["tools"]
    assert tool["config"]["team"] == "alpha"


def test_a_rollout_job_gets_the_runs_team_too(server, team, member):
    running = Run.objects.create(
        team=team, created_by=member, name="r", config={}, queue="cpu", status=RunStatus.RUNNING
    )
    job = rollout_job_bound(payload(running, tools=[binding(team="beta")]))
    assert job.spec["tools"][0]["config"]["team"] == "alpha"
    with pytest.raises(RolloutJobRefused, match="tools.0.config.server"):
        rollout_job_bound(payload(running, tools=[binding("theirs", team="beta")]))


def test_the_inspector_shows_mcp_calls_with_their_server(server, client_for, member, run, make_trajectory):
    calls = [ToolCall("add", {"a": 2, "b": 40}), ToolCall("fails", {})]
    toolset = Toolset.build(
        [binding(team="alpha"), binding(tool="fails", parameters={"type": "object"}, team="alpha")]
    )
    with operator_context():
        results = asyncio.run(toolset.call_many(calls))
    traj = make_trajectory("g0", 0)
    traj.turns[1].tool_calls, traj.turns[2].tool_results = calls, results
    trajectories_ingest(run_id=run.pk, batches={1: [traj]})
    url = reverse("runs:trajectory", args=[run.pk, run.trajectories.get().pk])
    body = client_for(member).get(url).content.decode()
    served = '<code>add</code> <span class="muted">on server</span> <code class="tool-server">web</code>'
    assert f"response from</span> {served}" in body
    assert "the tool failed on purpose" in body and "· server error" in body
