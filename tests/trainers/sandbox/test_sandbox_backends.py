"""Backends behind one interface: the local pool, a SandboxFusion service over HTTP, and the CLI."""

from __future__ import annotations

import asyncio
import json
import subprocess
import sys
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pytest

from trainers.net import ALLOW_ENV, EGRESS_ERROR
from trainers.registry import RegistryError
from trainers.sandbox import LocalSandbox, SandboxFusion, build_sandbox

FUSION_REPLIES = {
    "print('hi')": {
        "status": "Success",
        "message": "",
        "run_result": {
            "status": "Finished",
            "execution_time": 0.02,
            "return_code": 0,
            "stdout": "hi\n",
            "stderr": "",
        },
    },
    "1/0": {
        "status": "Failed",
        "message": "",
        "run_result": {
            "status": "Finished",
            "execution_time": 0.03,
            "return_code": 1,
            "stdout": "",
            "stderr": "Traceback (most recent call last):\nZeroDivisionError: division by zero\n",
        },
    },
    "while True: pass": {
        "status": "Failed",
        "message": "",
        "run_result": {"status": "TimeLimitExceeded", "execution_time": 10.0, "return_code": None},
    },
}


class FusionHandler(BaseHTTPRequestHandler):
    """Speaks SandboxFusion's `POST /run_code` shape; answers from FUSION_REPLIES by code."""

    requests: list[dict] = []

    def do_POST(self) -> None:
        body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
        FusionHandler.requests.append({"path": self.path, **body})
        reply = json.dumps(FUSION_REPLIES[body["code"]]).encode()
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(reply)))
        self.end_headers()
        self.wfile.write(reply)

    def log_message(self, *args: object) -> None:
        pass


@pytest.fixture(scope="module")
def fusion_server() -> Iterator[str]:
    server = ThreadingHTTPServer(("127.0.0.1", 0), FusionHandler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    yield f"http://127.0.0.1:{server.server_address[1]}"
    server.shutdown()


@pytest.fixture
def fusion_url(fusion_server: str, monkeypatch: pytest.MonkeyPatch) -> str:
    """The service's URL, allowlisted by the operator as an internal SandboxFusion host is."""
    monkeypatch.setenv(ALLOW_ENV, fusion_server.removeprefix("http://"))
    return fusion_server


def test_fusion_posts_code_and_language(fusion_url: str) -> None:
    result = asyncio.run(SandboxFusion(url=fusion_url).run("print('hi')"))
    assert (result.status, result.stdout) == ("ok", "hi\n")
    assert FusionHandler.requests[-1] == {
        "path": "/run_code",
        "code": "print('hi')",
        "language": "python",
        "run_timeout": 10.0,
    }


def test_fusion_error_uses_last_stderr_line(fusion_url: str) -> None:
    result = asyncio.run(SandboxFusion(url=fusion_url).run("1/0"))
    assert (result.status, result.error_line) == ("error", "ZeroDivisionError: division by zero")


def test_fusion_time_limit_is_a_timeout(fusion_url: str) -> None:
    assert asyncio.run(SandboxFusion(url=fusion_url).run("while True: pass")).status == "timeout"


def test_fusion_unreachable_service_is_an_error_not_a_crash(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(ALLOW_ENV, "127.0.0.1:9")  # allowed: the closed port is what fails
    result = asyncio.run(SandboxFusion(url="http://127.0.0.1:9", limits={"wall_s": 1}).run("print(1)"))
    assert (result.status, result.error_line) == ("error", f"SandboxError: {EGRESS_ERROR}")


def test_fusion_on_an_internal_host_needs_the_operator_allowlist(
    fusion_server: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv(ALLOW_ENV, raising=False)
    sent = len(FusionHandler.requests)
    result = asyncio.run(SandboxFusion(url=fusion_server).run("print('hi')"))
    # Refused before connecting, in the same words as the closed port above.
    assert (result.status, result.error_line) == ("error", f"SandboxError: {EGRESS_ERROR}")
    assert len(FusionHandler.requests) == sent


def test_build_sandbox_selects_backend_by_name(fusion_url: str) -> None:
    assert isinstance(build_sandbox("sandboxfusion", url=fusion_url), SandboxFusion)
    with pytest.raises(RegistryError, match="known: local, sandboxfusion"):
        build_sandbox("docker")


def test_local_sandbox_runs_calls_concurrently() -> None:
    sandbox = LocalSandbox({"wall_s": 5}, pool_size=2)
    snippet = "import time\nstart = time.time()\ntime.sleep(1.0)\nprint(start, time.time())"

    async def two_sleeps() -> list:
        return await asyncio.gather(*(sandbox.run(snippet) for _ in range(2)))

    spans = [tuple(map(float, r.stdout.split())) for r in asyncio.run(two_sleeps())]
    # Each snippet stamps its start and end: run one after the other, one would start after the other
    # ended; concurrently, both started before either ended.
    assert max(start for start, _ in spans) < min(end for _, end in spans)


@pytest.mark.slow
def test_cli_prints_json_and_exits_zero(tmp_path: Path) -> None:
    snippet = tmp_path / "snippet.py"
    snippet.write_text("print('from file')\nraise ValueError('bad')\n")
    proc = subprocess.run(
        [sys.executable, "-m", "trainers", "sandbox", str(snippet)],
        capture_output=True,
        text=True,
        timeout=60,
        cwd=Path(__file__).resolve().parents[3],
    )
    assert proc.returncode == 0
    result = json.loads(proc.stdout)
    assert result["status"] == "error"
    assert result["stdout"] == "from file\n"
    assert result["error_line"] == "ValueError: bad"
    assert set(result) == {"status", "stdout", "stderr", "error_line", "elapsed_s", "truncated"}
