"""`python -m trainers tools list-mcp` against real servers, and `mcp-serve` serving the built-ins."""

from __future__ import annotations

import json
import shlex
import subprocess
import sys

import pytest

from tests.support.mcp_processes import REPO, http_mcp_server
from trainers.mcp import schema_hash
from trainers.tools import TOOLS

pytestmark = pytest.mark.slow  # each test starts interpreters and a server


def list_mcp(target: str) -> subprocess.CompletedProcess:
    command = [sys.executable, "-m", "trainers", "tools", "list-mcp", target, "--timeout", "20"]
    return subprocess.run(command, cwd=REPO, capture_output=True, text=True, timeout=120)


def test_lists_an_http_servers_tools_as_json() -> None:
    with http_mcp_server() as server:
        out = list_mcp(server.url)
    assert out.returncode == 0, out.stderr
    tools = {tool["name"]: tool for tool in json.loads(out.stdout)}
    assert tools["add"]["description"] == "Add two integers."
    assert tools["add"]["schema_hash"] == schema_hash(tools["add"]["input_schema"])


def test_mcp_serve_offers_the_built_in_calculator_over_stdio_with_its_own_schema() -> None:
    serve = shlex.join([sys.executable, "-m", "trainers", "mcp-serve", "calculator", "--stdio"])
    out = list_mcp(serve)
    assert out.returncode == 0, out.stderr
    (calculator,) = json.loads(out.stdout)
    spec = TOOLS.get("calculator").spec()["function"]
    assert (calculator["name"], calculator["input_schema"]) == ("calculator", spec["parameters"])


def test_a_server_that_is_not_there_is_one_line_and_exit_status_1() -> None:
    out = list_mcp("http://127.0.0.1:9/mcp")
    assert out.returncode == 1
    assert out.stderr.startswith("python -m trainers tools list-mcp: error: MCP server 'target'")
    assert "unreachable" in out.stderr
    assert out.stdout == ""
