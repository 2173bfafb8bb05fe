"""Start tests/support/mcp_server.py as a real process: over streamable HTTP on a loopback port, or
named as a stdio command in the operator's server list."""

from __future__ import annotations

import contextlib
import json
import socket
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

from tests.support.polling import wait_for

REPO = Path(__file__).resolve().parents[2]
SERVER_MODULE = "tests.support.mcp_server"


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _listening(port: int) -> bool:
    with contextlib.suppress(OSError), socket.create_connection(("127.0.0.1", port), timeout=0.5):
        return True
    return False


class HttpMcpServer:
    """The test server over streamable HTTP; `restart` starts it again on the same port."""

    def __init__(self, variant: int = 1, port: int | None = None) -> None:
        self.variant = variant
        self.port = port or free_port()
        self.url = f"http://127.0.0.1:{self.port}/mcp"
        self.process: subprocess.Popen | None = None

    def start(self) -> HttpMcpServer:
        command = [sys.executable, "-m", SERVER_MODULE, "http", "--port", str(self.port)]
        command += ["--variant", str(self.variant)]
        self.process = subprocess.Popen(command, cwd=REPO, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
        wait_for(lambda: _listening(self.port) or self.process.poll() is not None, 30, "the MCP server")
        if self.process.poll() is not None:
            raise AssertionError(f"the MCP server exited: {self.process.stderr.read().decode()[-2000:]}")
        return self

    def stop(self) -> None:
        if self.process is not None and self.process.poll() is None:
            self.process.kill()
            self.process.wait(10)

    def restart(self, variant: int | None = None) -> None:
        self.stop()
        self.variant = variant or self.variant
        self.start()


@contextlib.contextmanager
def http_mcp_server(variant: int = 1) -> Iterator[HttpMcpServer]:
    server = HttpMcpServer(variant).start()
    try:
        yield server
    finally:
        server.stop()


def stdio_command(variant: int = 1) -> list[str]:
    """The argv an operator would list to run the test server over stdio (run from the repository)."""
    return [sys.executable, "-c", _STDIO_BOOT.format(repo=str(REPO)), "--variant", str(variant)]


# stdio servers start with a clean environment and an unknown working directory: the command itself
# puts the repository on the path
_STDIO_BOOT = (
    "import sys; sys.path.insert(0, {repo!r}); sys.argv[1:1] = ['stdio']; "
    "from tests.support.mcp_server import main; main()"
)


def servers_setting(**servers: dict) -> str:
    """The WORKBENCH_MCP_SERVERS value listing `servers` by name."""
    return json.dumps([{"name": name, **server} for name, server in servers.items()])
