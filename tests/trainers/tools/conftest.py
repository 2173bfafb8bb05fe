"""A local HTTP endpoint standing in for a team's tool server: echoes, sleeps on request, or fails; requests
that name a rendezvous ({"meet": name, "parties": n}) are answered only once n of them are in at once."""

from __future__ import annotations

import contextlib
import json
import threading
import time
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest

from trainers.net import ALLOW_ENV

_barriers: dict[str, threading.Barrier] = {}
_barriers_lock = threading.Lock()


def _meet(name: str, parties: int) -> bool:
    """True once `parties` requests naming this rendezvous are inside the server at the same time;
    False after 5 s without them (requests sent one after another never meet)."""
    with _barriers_lock:
        barrier = _barriers.setdefault(name, threading.Barrier(parties))
    try:
        barrier.wait(timeout=5)
    except threading.BrokenBarrierError:
        return False
    return True


class ToolEndpoint(BaseHTTPRequestHandler):
    def do_POST(self) -> None:
        body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
        met = "meet" not in body or _meet(body["meet"], int(body["parties"]))
        time.sleep(float(body.get("sleep", 0)))
        status = 500 if self.path == "/fail" or not met else 200
        reply = json.dumps(
            {"path": self.path, "echo": body, "auth": self.headers.get("Authorization")}
        ).encode()
        with contextlib.suppress(BrokenPipeError):  # the timeout test hangs up before the reply
            self.send_response(status)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(reply)))
            self.end_headers()
            self.wfile.write(reply)

    def log_message(self, *args: object) -> None:
        pass


@pytest.fixture(scope="module")
def endpoint() -> Iterator[str]:
    """The server's URL; its loopback address:port is allowlisted (internal hosts are refused by default)."""
    server = ThreadingHTTPServer(("127.0.0.1", 0), ToolEndpoint)
    server.daemon_threads = True
    threading.Thread(target=server.serve_forever, daemon=True).start()
    port = server.server_address[1]
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv(ALLOW_ENV, f"127.0.0.1:{port}")
        yield f"http://127.0.0.1:{port}"
    server.shutdown()
