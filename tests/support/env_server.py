"""A real environment server for tests: `python -m trainers env-server ENV --port 0` in a child process."""

from __future__ import annotations

import contextlib
import subprocess
import sys
from collections.abc import Iterator
from dataclasses import dataclass

import pytest

from trainers.net import ALLOW_ENV


@dataclass
class ServerProcess:
    url: str
    process: subprocess.Popen

    def kill(self) -> None:
        self.process.kill()
        self.process.wait(timeout=10)


@contextlib.contextmanager
def env_server(env: str, *flags: str) -> Iterator[ServerProcess]:
    """The server's URL once it listens; its loopback port is allowlisted for the egress guard meanwhile."""
    process = subprocess.Popen(
        [sys.executable, "-m", "trainers", "env-server", env, "--port", "0", *flags],
        stdout=subprocess.PIPE,
        text=True,
    )
    try:
        line = process.stdout.readline()  # "env-server ENV listening on http://127.0.0.1:PORT"
        assert "listening on http://" in line, f"the server did not start: {line!r}"
        url = line.split()[-1]
        with pytest.MonkeyPatch.context() as patch:
            patch.setenv(ALLOW_ENV, url.removeprefix("http://"))
            yield ServerProcess(url, process)
    finally:
        process.kill()
        process.wait(timeout=10)
        process.stdout.close()
