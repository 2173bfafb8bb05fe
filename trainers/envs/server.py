"""A registered environment served over OpenEnv's HTTP protocol, one episode per `episode_id`.

openenv-core 0.3.0 answers `POST /reset` and `POST /step` with a fresh environment per request and keeps an
episode alive only over its `/ws` WebSocket. Here episodes live across plain HTTP requests, named by
OpenEnv's own `episode_id` field (a reset field in OpenEnv; an extra field of a step, which OpenEnv allows):

- `POST /reset` `{"episode_id"?, "seed"?, "initial_state"?}`: start (or restart) that episode; without an
  id the server names one. Answers OpenEnv's `{"observation", "reward": null, "done"}` plus `episode_id`.
- `POST /step` `{"episode_id", "action": {"action": "up"}}`: `{"observation", "reward", "done"}`.
- `GET /state?episode_id=...`: OpenEnv's state (`episode_id`, `step_count`) and `done`, `total_reward`.
- `POST /close` `{"episode_id"}`: end it (OpenEnv's WebSocket `close` message, over HTTP).
- `GET /health`, `GET /schema` (action, observation and state schemas), `GET /metadata`.

An observation is `{"text": the rendered grid (and describe line), "state_hash": the exact state's hash}`.
Live episodes are bounded (idle ones are dropped first when the bound is reached), and so is a request's
body. Environment steps take microseconds: each request is served in its own thread, an episode's
requests one at a time.
"""

from __future__ import annotations

import json
import re
import sys
import threading
import time
import uuid
from collections.abc import Callable
from dataclasses import dataclass, field
from http import HTTPStatus
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any
from urllib.parse import parse_qs, urlsplit

from trainers.envs.base import ENVIRONMENTS, Environment

MAX_EPISODES = 1024
IDLE_S = 600.0  # an episode untouched this long is dropped when a new one needs its place
MAX_BODY_BYTES = 64 * 1024
EPISODE_ID = re.compile(r"[A-Za-z0-9_.-]{1,64}")


class RequestError(Exception):
    """Answered as `{"detail": message}` with `status`."""

    def __init__(self, status: HTTPStatus, message: str) -> None:
        super().__init__(message)
        self.status = status


@dataclass
class Episode:
    env: Environment
    lock: threading.Lock = field(default_factory=threading.Lock)
    last_used: float = field(default_factory=time.monotonic)


class Episodes:
    """The live episodes by id, at most `limit`; at the bound, those idle for `idle_s` make room."""

    def __init__(self, make: Callable[[], Environment], limit: int = MAX_EPISODES, idle_s: float = IDLE_S):
        self.make, self.limit, self.idle_s = make, limit, idle_s
        self._items: dict[str, Episode] = {}
        self._lock = threading.Lock()

    def __len__(self) -> int:
        return len(self._items)

    def open(self, episode_id: str) -> Episode:
        """The episode of that id, made if new (RequestError 503 when the bound is reached)."""
        with self._lock:
            episode = self._items.get(episode_id)
            if episode is None:
                if len(self._items) >= self.limit:
                    self._drop_idle()
                if len(self._items) >= self.limit:
                    raise RequestError(HTTPStatus.SERVICE_UNAVAILABLE, f"{self.limit} episodes are live")
                episode = self._items[episode_id] = Episode(self.make())
            episode.last_used = time.monotonic()
            return episode

    def get(self, episode_id: str) -> Episode:
        with self._lock:
            episode = self._items.get(episode_id)
            if episode is None:
                raise RequestError(HTTPStatus.NOT_FOUND, f"no live episode {episode_id!r}; reset first")
            episode.last_used = time.monotonic()
            return episode

    def close(self, episode_id: str) -> bool:
        with self._lock:
            return self._items.pop(episode_id, None) is not None

    def _drop_idle(self) -> None:
        cutoff = time.monotonic() - self.idle_s
        for key in [key for key, ep in self._items.items() if ep.last_used <= cutoff]:
            del self._items[key]


class EnvironmentServer:
    """The protocol over one registered environment and its config; `handle` serves one request."""

    def __init__(
        self,
        env_name: str,
        config: dict[str, Any] | None = None,
        *,
        max_episodes: int = MAX_EPISODES,
        idle_s: float = IDLE_S,
        max_body_bytes: int = MAX_BODY_BYTES,
    ) -> None:
        self.env_class = ENVIRONMENTS.get(env_name)
        self.env_name, self.config, self.max_body_bytes = env_name, dict(config or {}), max_body_bytes
        self.env_class(**self.config).reset(seed=0)  # a bad config fails here, not at the first reset
        self.episodes = Episodes(lambda: self.env_class(**self.config), max_episodes, idle_s)

    def handle(self, method: str, path: str, query: dict[str, str], body: dict[str, Any]) -> dict[str, Any]:
        routes: dict[tuple[str, str], Callable[[], dict[str, Any]]] = {
            ("GET", "/health"): lambda: {"status": "healthy"},
            ("GET", "/metadata"): self.metadata,
            ("GET", "/schema"): self.schema,
            ("GET", "/state"): lambda: self.state(query),
            ("POST", "/reset"): lambda: self.reset(body),
            ("POST", "/step"): lambda: self.step(body),
            ("POST", "/close"): lambda: {"closed": self.episodes.close(episode_id(body))},
        }
        route = routes.get((method, path))
        if route is None:
            raise RequestError(HTTPStatus.NOT_FOUND, f"no route {method} {path}")
        return route()

    def reset(self, body: dict[str, Any]) -> dict[str, Any]:
        key = episode_id(body) if "episode_id" in body else uuid.uuid4().hex
        seed, initial_state = body.get("seed"), body.get("initial_state")
        if seed is not None and (isinstance(seed, bool) or not isinstance(seed, int)):
            raise RequestError(HTTPStatus.UNPROCESSABLE_ENTITY, "seed must be an integer")
        if initial_state is not None and not isinstance(initial_state, dict):
            raise RequestError(HTTPStatus.UNPROCESSABLE_ENTITY, "initial_state must be an object")
        episode = self.episodes.open(key)
        with episode.lock:
            try:
                episode.env.reset(initial_state, seed)
            except ValueError as exc:
                self.episodes.close(key)
                raise RequestError(HTTPStatus.UNPROCESSABLE_ENTITY, str(exc)) from None
            return {**self.result(episode.env, None), "episode_id": key}

    def step(self, body: dict[str, Any]) -> dict[str, Any]:
        action = body.get("action")
        if not isinstance(action, dict) or not isinstance(action.get("action"), str):
            raise RequestError(HTTPStatus.UNPROCESSABLE_ENTITY, 'action must be {"action": "<name>"}')
        episode = self.episodes.get(episode_id(body))
        with episode.lock:
            if episode.env.done:
                raise RequestError(HTTPStatus.CONFLICT, "the episode is over; reset it")
            try:
                _, reward, _ = episode.env.step(action["action"])
            except ValueError as exc:
                raise RequestError(HTTPStatus.UNPROCESSABLE_ENTITY, str(exc)) from None
            return self.result(episode.env, reward)

    def state(self, query: dict[str, str]) -> dict[str, Any]:
        key = episode_id(query)
        env = self.episodes.get(key).env
        return {
            "episode_id": key,
            "step_count": env.steps,
            "done": env.done,
            "total_reward": env.total_reward,
        }

    @staticmethod
    def result(env: Environment, reward: float | None) -> dict[str, Any]:
        observation = {"text": env.observation(), "state_hash": env.state_hash()}
        return {"observation": observation, "reward": reward, "done": env.done}

    def metadata(self) -> dict[str, Any]:
        return {
            "name": self.env_name,
            "description": " ".join((self.env_class.__doc__ or "").split()),
            "legend": self.env_class.legend,
            "actions": list(self.env_class.actions),
            "config": self.config,
            "episodes": len(self.episodes),
            "max_episodes": self.episodes.limit,
        }

    def schema(self) -> dict[str, Any]:
        action = {
            "type": "object",
            "properties": {"action": {"type": "string", "enum": list(self.env_class.actions)}},
            "required": ["action"],
        }
        observation = {
            "type": "object",
            "properties": {"text": {"type": "string"}, "state_hash": {"type": "string"}},
        }
        state = {
            "type": "object",
            "properties": {
                "episode_id": {"type": "string"}, "step_count": {"type": "integer"},
                "done": {"type": "boolean"}, "total_reward": {"type": "number"},
            },
        }  # fmt: skip
        return {"action": action, "observation": observation, "state": state}


def episode_id(fields: dict[str, Any]) -> str:
    value = fields.get("episode_id")
    if not isinstance(value, str) or not EPISODE_ID.fullmatch(value):
        raise RequestError(HTTPStatus.UNPROCESSABLE_ENTITY, "episode_id must be 1 to 64 of A-Z a-z 0-9 _ . -")
    return value


class Handler(BaseHTTPRequestHandler):
    """JSON in, JSON out; a keep-alive connection idle for `timeout` seconds is closed."""

    protocol_version = "HTTP/1.1"
    timeout = 60
    server: HTTPEnvironmentServer

    def do_GET(self) -> None:
        self._serve("GET")

    def do_POST(self) -> None:
        self._serve("POST")

    def _serve(self, method: str) -> None:
        url = urlsplit(self.path)
        try:
            body = self._body() if method == "POST" else {}
            query = {key: values[-1] for key, values in parse_qs(url.query).items()}
            status, reply = HTTPStatus.OK, self.server.app.handle(method, url.path, query, body)
        except RequestError as exc:
            status, reply = exc.status, {"detail": str(exc)}
        self._send(status, reply)

    def _body(self) -> dict[str, Any]:
        length = self.headers.get("Content-Length")
        if length is None or not length.isdigit():
            self.close_connection = True
            raise RequestError(HTTPStatus.LENGTH_REQUIRED, "a body needs a Content-Length")
        if int(length) > self.server.app.max_body_bytes:
            self.close_connection = True  # the body is left unread
            raise RequestError(
                HTTPStatus.REQUEST_ENTITY_TOO_LARGE, f"body over {self.server.app.max_body_bytes} bytes"
            )
        try:
            body = json.loads(self.rfile.read(int(length)) or b"{}")
        except (UnicodeDecodeError, json.JSONDecodeError) as exc:
            raise RequestError(HTTPStatus.BAD_REQUEST, f"body is not JSON: {exc}") from None
        if not isinstance(body, dict):
            raise RequestError(HTTPStatus.BAD_REQUEST, "body must be a JSON object")
        return body

    def _send(self, status: HTTPStatus, reply: dict[str, Any]) -> None:
        data = json.dumps(reply, ensure_ascii=False).encode()
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def log_message(self, format: str, *args: Any) -> None:
        """Quiet: a rollout makes thousands of requests."""


class HTTPEnvironmentServer(ThreadingHTTPServer):
    daemon_threads = True
    request_queue_size = 512  # a rollout's trajectories connect at once; 5 (the default) drops connections

    def __init__(self, address: tuple[str, int], app: EnvironmentServer) -> None:
        super().__init__(address, Handler)
        self.app = app

    def handle_error(self, request: Any, client_address: Any) -> None:
        """A client that hung up (a trajectory's tool closing its connection) is no server error."""
        if not isinstance(sys.exc_info()[1], ConnectionError):
            super().handle_error(request, client_address)
