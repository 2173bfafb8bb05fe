"""The env_server tool against real servers: the Sokoban server plays as the in-process tool does, and a
hostile server (garbage, error statuses, a huge or late answer) ends the episode with an error observation,
its calls marked as server errors, never an exception."""

from __future__ import annotations

import asyncio
import contextlib
import json
import random
import threading
import time
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest

from tests.support.env_server import env_server
from trainers.envs.base import MOVES
from trainers.net import ALLOW_ENV, EGRESS_ERROR
from trainers.tools.toolset import Toolset
from trainers.trajectory import ToolCall

LEVELS = [{"seed": 0}, {"seed": 5, "num_boxes": 2, "size": 7}, {"grid": ["#####", "#PX_O", "#####"]}]


async def turn(toolset: Toolset, name: str, *arguments: dict):
    return await toolset.call_many([ToolCall(name, a) for a in arguments])


def started(config: dict, **build) -> Toolset:
    """An env_server toolset, not yet started: a test's start, calls and close share one event loop."""
    return Toolset.build([{"name": "env_server", "config": config}], **build)


@pytest.mark.parametrize("level", LEVELS)
def test_the_sokoban_server_gives_the_in_process_tools_observations_rewards_and_states(level):
    rng = random.Random(json.dumps(level))
    plays = [[{"action": rng.choice(list(MOVES))}] for _ in range(12)] + [[{"action": "left || right"}]]
    local = Toolset.build([{"name": "sokoban", "config": {"describe": True}}], initial_state=level, seed=9)

    async def play_both(url: str) -> None:
        remote = started({"url": url, "name": "sokoban", "actions": list(MOVES)}, initial_state=level, seed=9)
        await remote.start()
        assert remote.environment.observation() == local.environment.observation()
        for play in plays:
            mine, theirs = await turn(remote, "sokoban", *play), await turn(local, "sokoban", *play)
            assert [(r.ok, r.output, r.error) for r in mine] == [(r.ok, r.output, r.error) for r in theirs]
            assert all(r.server == "sokoban" and not r.server_error for r in mine)
            assert remote.environment.state_hash() == local.environment.state_hash()
            assert remote.environment.rewards == pytest.approx(local.environment.rewards, rel=1e-9)
            assert remote.environment.done == local.environment.done
        await remote.close()

    with env_server("sokoban", "--describe") as server:
        asyncio.run(play_both(server.url))
    assert len(local.environment.rewards) > 2


def test_without_actions_a_call_is_one_action_sent_as_it_is():

    async def play(toolset: Toolset) -> list:
        await toolset.start()
        calls = [
            {"action": "right"},
            {"action": "Right"},
            {"action": "right"},
        ]  # no lower-casing: the server's
        return [(await turn(toolset, "lake", call))[0] for call in calls]

    with env_server("frozenlake") as server:
        config = {"url": server.url, "name": "lake", "parameters": {"type": "object"}}
        toolset = started(config, initial_state={"grid": ["P_G"]})
        moved, refused, won = asyncio.run(play(toolset))
    assert moved.ok and moved.output == "_PG\nreward: 0, done: false"
    assert (
        not refused.ok
        and refused.error
        == "lake: the action was refused: unknown action 'Right'; use one of up, down, left, right"
    )
    assert won.output == "__W\nreward: 1, done: true" and toolset.environment.rewards == [0.0, 1.0]
    assert not refused.server_error and refused.server == "lake"  # a refused action is the call's fault


class Hostile(BaseHTTPRequestHandler):
    """Answers /reset properly and every /step as the server's `step_reply` (status, body, delay) says."""

    protocol_version = "HTTP/1.1"

    def do_POST(self) -> None:
        self.rfile.read(int(self.headers["Content-Length"]))
        if self.path == "/reset":
            status, body, delay = (
                200,
                json.dumps({"observation": {"text": "P_G"}, "reward": None, "done": False}),
                0,
            )
        else:
            status, body, delay = self.server.step_reply
        time.sleep(delay)
        data = body.encode()
        with contextlib.suppress(ConnectionError):  # the client gave up on a late or huge answer
            self.send_response(status)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)

    def log_message(self, *args: object) -> None:
        pass


@pytest.fixture
def hostile(monkeypatch) -> Iterator[ThreadingHTTPServer]:
    server = ThreadingHTTPServer(("127.0.0.1", 0), Hostile)
    server.daemon_threads = True
    threading.Thread(target=server.serve_forever, daemon=True).start()
    monkeypatch.setenv(ALLOW_ENV, f"127.0.0.1:{server.server_port}")
    yield server
    server.shutdown()
    server.server_close()


GARBAGE = {
    "not JSON": ((200, "<html>oops</html>", 0), "malformed answer: not JSON"),
    "no observation": ((200, '{"observation": "P_G", "done": false}', 0), "malformed answer: no observation"),
    "done not a bool": (
        (200, '{"observation": {}, "reward": 1, "done": "yes"}', 0),
        "malformed answer: done",
    ),
    "reward not finite": (
        (200, '{"observation": {}, "reward": NaN, "done": false}', 0),
        "not a finite number",
    ),
    "error status": ((500, '{"detail": "boom"}', 0), "HTTP 500: boom"),
    "episode gone": ((404, '{"detail": "no live episode"}', 0), "HTTP 404: no live episode"),
    "huge": ((200, json.dumps({"observation": {"text": "x" * (2 << 20)}, "done": False}), 0), "answer over"),
    "late": ((200, '{"observation": {}, "reward": 0, "done": false}', 2.0), "no answer within 0.5s"),
}


@pytest.mark.parametrize("name", GARBAGE)
def test_a_hostile_answer_ends_the_episode_with_an_error_observation_and_server_errors(hostile, name):
    hostile.step_reply, expected = GARBAGE[name]
    config = {"url": f"http://127.0.0.1:{hostile.server_port}", "name": "lake", "actions": list(MOVES),
              "timeout_s": 0.5}  # fmt: skip
    toolset = started(config)

    async def play() -> list:
        await toolset.start()
        assert toolset.environment.observation() == "P_G" and not toolset.environment.done
        results = [(await turn(toolset, "lake", {"action": "right"}))[0] for _ in range(2)]
        await toolset.close()
        return results

    first, again = asyncio.run(play())
    assert (
        not first.ok
        and first.error.startswith("lake: environment server error: ")
        and expected in first.error
    )
    assert first.error.endswith("; the episode is over") and again.error == first.error
    assert toolset.environment.done and toolset.environment.observation() == "P_G"
    assert first.server_error and again.server_error and first.server == "lake"


def test_a_server_that_is_not_there_ends_the_episode_at_its_reset(monkeypatch):
    monkeypatch.setenv(ALLOW_ENV, "127.0.0.1:9")
    config = {"url": "http://127.0.0.1:9", "name": "lake", "actions": list(MOVES), "timeout_s": 2}
    toolset = started(config)

    async def play() -> list:
        await toolset.start()
        return await turn(toolset, "lake", {"action": "up"})

    (result,) = asyncio.run(play())
    error = f"lake: environment server error: {EGRESS_ERROR}; the episode is over"
    assert toolset.environment.done and toolset.environment.observation() == error and result.error == error
    assert result.server_error and result.server == "lake"


def test_the_egress_guard_refuses_a_loopback_server_nobody_allowlisted(monkeypatch):
    monkeypatch.delenv(ALLOW_ENV, raising=False)
    with env_server("frozenlake") as server:
        monkeypatch.delenv(ALLOW_ENV, raising=False)
        toolset = started({"url": server.url, "name": "lake", "actions": list(MOVES)})
        asyncio.run(toolset.start())
    assert (
        toolset.environment.done and "host not reachable or not allowed" in toolset.environment.observation()
    )


def test_a_level_the_server_refuses_ends_the_episode_without_counting_a_server_error():
    with env_server("frozenlake") as server:
        toolset = started(
            {"url": server.url, "name": "lake", "actions": list(MOVES)}, initial_state={"grid": ["PQ"]}
        )
        asyncio.run(toolset.start())
    observation = toolset.environment.observation()
    assert observation.startswith(
        "lake: the level was refused: bad initial_state for frozenlake: unknown symbols"
    )
    assert observation.endswith("; the episode is over") and toolset.environment.done
    (result,) = asyncio.run(turn(toolset, "lake", {"action": "up"}))
    assert result.error == observation and not result.server_error
