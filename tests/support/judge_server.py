"""A local OpenAI-compatible judge for tests: `POST /v1/chat/completions` answered by a scripted function
of the request body, so every parse case is deterministic. Its loopback port is allowlisted for the
egress guard while it runs, and `register` names it in WORKBENCH_JUDGES."""

from __future__ import annotations

import contextlib
import json
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import pytest

from trainers.net import ALLOW_ENV
from trainers.rewards.judge_endpoints import JUDGES_ENV


@dataclass(frozen=True)
class Answer:
    """What the judge answers: its text (or a refusal), the HTTP status, a delay before answering."""

    content: str | None = None
    status: int = 200
    sleep_s: float = 0.0
    refusal: str | None = None
    prompt_tokens: int = 11
    completion_tokens: int = 3


Script = Callable[[dict[str, Any]], Answer | str]


def user_prompt(body: dict[str, Any]) -> str:
    """The rendered rubric: the last message of the request."""
    return body["messages"][-1]["content"]


def echo(body: dict[str, Any]) -> str:
    """A judge that answers the rubric's text itself (a rubric of `{{ response }}` lets the policy's
    response script the verdict)."""
    return user_prompt(body)


@dataclass
class JudgeServer:
    url: str  # the OpenAI base URL, ending in /v1
    requests: list[dict[str, Any]] = field(default_factory=list)
    headers: list[dict[str, str]] = field(default_factory=list)

    def register(self, patch: pytest.MonkeyPatch, name: str = "local", **settings: Any) -> str:
        """List this server in WORKBENCH_JUDGES as `name` (with extra endpoint settings); returns name."""
        patch.setenv(JUDGES_ENV, json.dumps({name: {"url": self.url, "model": "judge-model", **settings}}))
        return name


def _handler(server: JudgeServer, script: Script) -> type[BaseHTTPRequestHandler]:
    class Handler(BaseHTTPRequestHandler):
        def do_POST(self) -> None:
            body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
            server.requests.append(body)
            server.headers.append(dict(self.headers))
            answer = script(body)
            answer = Answer(content=answer) if isinstance(answer, str) else answer
            time.sleep(answer.sleep_s)
            self._reply(answer, _completion(body, answer) if self.path == "/v1/chat/completions" else {})

        def _reply(self, answer: Answer, payload: dict[str, Any]) -> None:
            data = json.dumps(payload).encode()
            with contextlib.suppress(BrokenPipeError, ConnectionResetError):  # a client that timed out
                self.send_response(answer.status if payload else 404)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

        def log_message(self, *args: object) -> None:
            pass

    return Handler


def _completion(body: dict[str, Any], answer: Answer) -> dict[str, Any]:
    if answer.status != 200:
        return {"error": {"message": "scripted failure"}}
    message = {"role": "assistant", "content": answer.content, "refusal": answer.refusal}
    usage = {"prompt_tokens": answer.prompt_tokens, "completion_tokens": answer.completion_tokens}
    choice = {"index": 0, "message": message, "finish_reason": "stop"}
    return {
        "id": "judge",
        "object": "chat.completion",
        "model": body.get("model"),
        "choices": [choice],
        "usage": usage,
    }


@contextlib.contextmanager
def judge_server(script: Script = echo) -> Iterator[JudgeServer]:
    """A running judge answering with `script(request body)`; 127.0.0.1:port is allowlisted meanwhile."""
    http = ThreadingHTTPServer(("127.0.0.1", 0), BaseHTTPRequestHandler)
    port = http.server_address[1]
    server = JudgeServer(f"http://127.0.0.1:{port}/v1")
    http.RequestHandlerClass = _handler(server, script)
    http.daemon_threads = True
    threading.Thread(target=http.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True).start()
    try:
        with pytest.MonkeyPatch.context() as patch:
            patch.setenv(ALLOW_ENV, f"127.0.0.1:{port}")
            yield server
    finally:
        http.shutdown()
        http.server_close()
