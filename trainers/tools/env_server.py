"""An environment behind an environment server (OpenEnv's HTTP protocol; `python -m trainers env-server`).

Each trajectory's tool owns one episode under a fresh `episode_id`: `start` resets it (`POST /reset` with the
dataset row's `initial_state` and the rollout's seed), each action is a `POST /step`, `close` ends it
(`POST /close`). The observation's `text` (else the observation as JSON) is the tool response, as the
in-process environment tools render it; each step's `reward` and `done` feed the environment reward and end
the episode; the observation's `state_hash` (else a hash of the observation) is GiGPO's anchor state.

With `actions` (the built-in games: up, down, left, right) a call takes several actions as the in-process
tools do (`{"action": "left || up"}`, `{"actions": [...]}`), each sent as `{"action": name}`; without,
the call's arguments are one action, sent as they are.

Requests go through the egress guard (trainers/net). A server that is down, times out or answers garbage
ends the episode with an error observation; every call's result names the tool as its `server`, and a call
that failed at the server is a `server_error` (the step metric `tools/server_errors/<tool>`).
"""

from __future__ import annotations

import asyncio
import contextlib
import hashlib
import json
import math
import uuid
from typing import Any

from trainers.net.policy import EGRESS_ERROR
from trainers.tools.base import TOOLS, Tool, ToolOutput
from trainers.tools.environment import MAX_ACTIONS_PER_TURN, EnvironmentTool
from trainers.trajectory import ToolResult

MAX_RESPONSE_BYTES = 1 << 20


class ServerFault(Exception):
    """The server failed the episode: unreachable, timed out, an error status or a malformed answer."""


class ActionRejected(Exception):
    """The server refused the action or level (HTTP 422): the call's fault, not the server's."""


class RemoteEpisode:
    """What a rollout reads of an environment (`observation()`, `state_hash()`, `rewards`, `done`,
    `invalid_action_penalty`), as the server last reported it."""

    def __init__(self, invalid_action_penalty: float = 0.0, max_chars: int = 4096) -> None:
        self.invalid_action_penalty, self.max_chars = invalid_action_penalty, max_chars
        self.text, self.hash = "", ""
        self.rewards: list[float] = []
        self.done = False
        self.error: str | None = None  # why the episode ended early (a server fault)

    def observation(self) -> str:
        return self.text

    def state_hash(self) -> str:
        return self.hash

    def update(self, payload: Any) -> float | None:
        """Take a reset or step answer (`{"observation": {...}, "reward", "done"}`); its reward."""
        if not isinstance(payload, dict) or not isinstance(payload.get("observation"), dict):
            raise ServerFault("malformed answer: no observation object")
        observation, reward, done = payload["observation"], payload.get("reward"), payload.get("done")
        if not isinstance(done, bool):
            raise ServerFault("malformed answer: done is not true or false")
        if reward is not None and (isinstance(reward, bool) or not isinstance(reward, int | float)
                                   or not math.isfinite(reward)):  # fmt: skip
            raise ServerFault("malformed answer: reward is not a finite number")
        as_json = json.dumps(observation, ensure_ascii=False, sort_keys=True)
        text, key = observation.get("text"), observation.get("state_hash")
        self.text = (text if isinstance(text, str) else as_json)[: self.max_chars]
        self.hash = key[:64] if isinstance(key, str) else hashlib.sha256(as_json.encode()).hexdigest()[:16]
        self.done = done
        return None if reward is None else float(reward)


@TOOLS.register("env_server")
class EnvironmentServerTool(EnvironmentTool):
    """Name, description and action schema come from config, so one class serves any environment server."""

    name = "env_server"
    description = "Act in the environment and see what it shows."
    parameters: dict[str, Any] = {"type": "object"}
    default_timeout_s = 10.0  # a round trip per action, queued behind a whole rollout's at its start
    startup_s = 5.0  # `run` bounds itself by timeout_s and ends the episode; invoke's timeout is a backstop

    def __init__(
        self,
        *,
        url: str,
        name: str = "env_server",
        description: str = "Act in the environment and see what it shows.",
        parameters: dict[str, Any] | None = None,
        actions: list[str] | None = None,
        max_actions_per_turn: int = MAX_ACTIONS_PER_TURN,
        invalid_action_penalty: float = 0.0,
        timeout_s: float | None = None,
        max_chars: int = 4096,
    ) -> None:
        Tool.__init__(self, timeout_s=timeout_s)  # no in-process environment to build
        self.count_turns(max_actions_per_turn)
        self.url, self.name, self.description = url.rstrip("/"), name, description
        self.actions = tuple(actions) if actions else None
        if parameters is not None:
            self.parameters = parameters
        elif self.actions:
            self.parameters = self.action_parameters(self.actions, max_actions_per_turn)
        self.environment = RemoteEpisode(invalid_action_penalty, max_chars)
        self.episode_id = uuid.uuid4().hex
        self.faulted = False  # a server fault ended the episode
        self._reset: dict[str, Any] = {}
        self._client: Any = None

    def reset(self, initial_state: dict[str, Any] | None = None, seed: int | None = None) -> str:
        """Noted here; `start` sends it (the toolset builds tools outside the event loop)."""
        fields = {"initial_state": initial_state, "seed": seed}
        self._reset = {key: value for key, value in fields.items() if value is not None}
        return self.environment.observation()

    async def start(self) -> None:
        try:
            async with asyncio.timeout(self.timeout_s):
                self.environment.update(
                    await self._post("/reset", {"episode_id": self.episode_id, **self._reset})
                )
        except TimeoutError:
            self._end(f"no answer within {self.timeout_s:g}s")
        except ServerFault as exc:
            self._end(str(exc))
        except ActionRejected as exc:
            self._end(f"the level was refused: {exc}", fault=False)
        if self.environment.error is not None:
            self.environment.text = self.environment.error

    async def invoke(self, arguments: Any) -> ToolResult:
        if self.actions:  # RAGEN's action text, as the in-process environment tools read it
            result = await super().invoke(arguments)
        else:
            result = await Tool.invoke(self, arguments)
        result.server, result.server_error = self.name, self.faulted and not result.ok
        return result

    async def run(self, arguments: dict[str, Any]) -> ToolOutput:
        if self.environment.error is not None:
            return ToolOutput(False, "", self.environment.error)
        try:
            async with asyncio.timeout(self.timeout_s):
                return await (super().run(arguments) if self.actions else self._run_one(arguments))
        except TimeoutError:
            return self._end(f"no answer within {self.timeout_s:g}s")
        except ServerFault as exc:
            return self._end(str(exc))
        except ActionRejected as exc:
            return ToolOutput(False, "", f"{self.name}: the action was refused: {exc}")

    async def _run_one(self, action: dict[str, Any]) -> ToolOutput:
        """The call's arguments as one action."""
        env = self.environment
        if env.done:
            return ToolOutput(False, "", "the episode is over; give your final answer")
        reward = await self._step(action)
        return ToolOutput(True, f"{env.observation()}\nreward: {reward:g}, done: {str(env.done).lower()}")

    async def take(self, action: str) -> float:
        return await self._step({"action": action})

    async def _step(self, action: dict[str, Any]) -> float:
        reward = self.environment.update(
            await self._post("/step", {"episode_id": self.episode_id, "action": action})
        )
        self.environment.rewards.append(reward or 0.0)
        return reward or 0.0

    def _end(self, message: str, *, fault: bool = True) -> ToolOutput:
        """End the episode with an error observation; `fault`: the server's (its calls are server errors)."""
        self.faulted = fault
        self.environment.done = True
        cause = f"environment server error: {message}" if fault else message
        self.environment.error = f"{self.name}: {cause}; the episode is over"
        return ToolOutput(False, "", self.environment.error)

    async def _post(self, path: str, body: dict[str, Any]) -> Any:
        """The JSON answer; ServerFault if unreachable, an error status (ActionRejected: 422) or garbage."""
        import httpx

        from trainers.net.guard import guarded_client
        from trainers.tools.http import ssl_context

        if self._client is None:
            self._client = guarded_client(timeout=self.timeout_s, verify=ssl_context())
        try:
            async with self._client.stream("POST", f"{self.url}{path}", json=body) as response:
                data = await _read_capped(response)
        except httpx.HTTPError:  # refused, unresolvable, unreachable, broken: the guard's one message
            raise ServerFault(EGRESS_ERROR) from None
        try:
            payload = json.loads(data)
        except (UnicodeDecodeError, json.JSONDecodeError):
            payload = None
        detail = payload.get("detail") if isinstance(payload, dict) else None
        if response.status_code == 422:
            raise ActionRejected(str(detail)[:500])
        if not response.is_success:
            raise ServerFault(f"HTTP {response.status_code}: {str(detail or data[:200])[:500]}")
        if payload is None:
            raise ServerFault("malformed answer: not JSON")
        return payload

    async def close(self) -> None:
        """End the episode on the server (best effort: an idle one is dropped there anyway)."""
        if self._client is None:
            return
        if self.environment.error is None:
            with contextlib.suppress(Exception):
                async with asyncio.timeout(self.timeout_s):
                    await self._post("/close", {"episode_id": self.episode_id})
        await self._client.aclose()
        self._client = None


def server_metadata(url: str, timeout_s: float = 10.0) -> dict[str, Any]:
    """An environment server's `GET /metadata` through the egress guard (ServerFault when unreachable or
    garbled): for trainers' own servers the environment's `name`, `actions`, `legend` and `config`."""
    import httpx

    from trainers.net.guard import guarded_client
    from trainers.tools.http import ssl_context

    async def fetch() -> Any:
        async with guarded_client(timeout=timeout_s, verify=ssl_context()) as client:
            try:
                response = await client.get(f"{url.rstrip('/')}/metadata")
            except httpx.HTTPError:
                raise ServerFault(EGRESS_ERROR) from None
        if not response.is_success:
            raise ServerFault(f"HTTP {response.status_code} from {url}/metadata")
        try:
            return response.json()
        except ValueError:
            return None

    payload = asyncio.run(fetch())
    if not isinstance(payload, dict):
        raise ServerFault("malformed answer: /metadata is not a JSON object")
    return payload


async def _read_capped(response: Any) -> bytes:
    chunks, size = [], 0
    async for chunk in response.aiter_bytes():
        size += len(chunk)
        if size > MAX_RESPONSE_BYTES:
            raise ServerFault(f"answer over {MAX_RESPONSE_BYTES} bytes")
        chunks.append(chunk)
    return b"".join(chunks)
