"""A local HTTP endpoint standing in for a team's tool server: echoes, sleeps on request, or fails."""

from __future__ import annotations

import contextlib
import json
import threading
import time
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest


class ToolEndpoint(BaseHTTPRequestHandler):
    def do_POST(self) -> None:
        body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
        time.sleep(float(body.get("sleep", 0)))
        status = 500 if self.path == "/fail" else 200
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
    server = ThreadingHTTPServer(("127.0.0.1", 0), ToolEndpoint)
    server.daemon_threads = True
    threading.Thread(target=server.serve_forever, daemon=True).start()
    yield f"http://127.0.0.1:{server.server_address[1]}"
    server.shutdown()
