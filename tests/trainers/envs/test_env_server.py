"""The environment server's protocol (OpenEnv's HTTP shapes, an episode per `episode_id`) and its bounds,
on a real server in a thread; `python -m trainers env-server` refuses a bad config before it listens."""

from __future__ import annotations

import threading
from collections.abc import Iterator

import httpx
import pytest

from trainers.cli import main
from trainers.envs.server import EnvironmentServer, HTTPEnvironmentServer

LAKE = {"grid": ["P_", "_G"]}


@pytest.fixture
def serve() -> Iterator:
    """serve(env, config, **bounds) -> an httpx client on a live server; all are shut down afterwards."""
    servers = []

    def start(env: str = "frozenlake", config: dict | None = None, **bounds) -> httpx.Client:
        server = HTTPEnvironmentServer(("127.0.0.1", 0), EnvironmentServer(env, config, **bounds))
        threading.Thread(target=server.serve_forever, daemon=True).start()
        servers.append(server)
        return httpx.Client(base_url=f"http://127.0.0.1:{server.server_port}", timeout=10)

    yield start
    for server in servers:
        server.shutdown()
        server.server_close()


def test_an_episode_is_reset_stepped_and_read_by_its_id_in_openenvs_shapes(serve):
    client = serve()
    reset = client.post("/reset", json={"episode_id": "e1", "initial_state": LAKE}).json()
    assert reset == {"observation": {"text": "P_\n_G", "state_hash": reset["observation"]["state_hash"]},
                     "reward": None, "done": False, "episode_id": "e1"}  # fmt: skip
    step = client.post("/step", json={"episode_id": "e1", "action": {"action": "right"}}).json()
    assert step["observation"]["text"] == "_P\n_G" and step["reward"] == 0.0 and step["done"] is False
    assert step["observation"]["state_hash"] != reset["observation"]["state_hash"]
    state = client.get("/state", params={"episode_id": "e1"}).json()
    assert state == {"episode_id": "e1", "step_count": 1, "done": False, "total_reward": 0.0}
    assert (
        client.post("/step", json={"episode_id": "e1", "action": {"action": "down"}}).json()["done"] is True
    )
    over = client.post("/step", json={"episode_id": "e1", "action": {"action": "up"}})
    assert over.status_code == 409
    assert client.post("/close", json={"episode_id": "e1"}).json() == {"closed": True}
    assert client.get("/state", params={"episode_id": "e1"}).status_code == 404


def test_episodes_are_independent_and_a_reset_without_an_id_gets_one(serve):
    client = serve()
    first = client.post("/reset", json={"seed": 4}).json()["episode_id"]
    second = client.post("/reset", json={"seed": 4}).json()["episode_id"]
    assert first != second
    client.post("/step", json={"episode_id": first, "action": {"action": "up"}})
    steps = [client.get("/state", params={"episode_id": key}).json()["step_count"] for key in (first, second)]
    assert steps == [1, 0]


def test_health_schema_and_metadata_describe_the_environment(serve):
    client = serve("sokoban", {"describe": True, "max_steps": 9})
    assert client.get("/health").json() == {"status": "healthy"}
    schema = client.get("/schema").json()
    assert schema["action"]["properties"]["action"]["enum"] == ["up", "down", "left", "right"]
    assert set(schema) == {"action", "observation", "state"}
    meta = client.get("/metadata").json()
    assert meta["name"] == "sokoban" and meta["config"] == {"describe": True, "max_steps": 9}
    assert meta["episodes"] == 0 and "#" in meta["legend"]


@pytest.mark.parametrize(
    ("request_kwargs", "status"),
    [
        ({"json": {"episode_id": "nope", "action": {"action": "up"}}}, 404),
        ({"json": {"episode_id": "e", "action": "up"}}, 422),
        ({"json": {"episode_id": "e", "action": {"action": "fly"}}}, 422),
        ({"json": {"episode_id": "../../etc", "action": {"action": "up"}}}, 422),
        ({"content": b"not json"}, 400),
        ({"content": b"[1, 2]"}, 400),
    ],
)
def test_bad_steps_are_refused_with_a_status_and_a_detail(serve, request_kwargs, status):
    client = serve()
    client.post("/reset", json={"episode_id": "e", "initial_state": LAKE})
    response = client.post("/step", **request_kwargs)
    assert response.status_code == status and response.json()["detail"]


def test_a_bad_level_is_refused_and_leaves_no_episode(serve):
    client = serve()
    response = client.post("/reset", json={"episode_id": "e", "initial_state": {"grid": ["PQ"]}})
    assert response.status_code == 422 and "unknown symbols" in response.json()["detail"]
    assert client.get("/metadata").json()["episodes"] == 0


def test_live_episodes_are_bounded_and_idle_ones_make_room(serve):
    busy = serve(max_episodes=2, idle_s=3600)
    for key in ("a", "b"):
        assert busy.post("/reset", json={"episode_id": key}).status_code == 200
    assert busy.post("/reset", json={"episode_id": "a"}).status_code == 200  # a restart takes no new place
    full = busy.post("/reset", json={"episode_id": "c"})
    assert full.status_code == 503 and "2 episodes are live" in full.json()["detail"]
    busy.post("/close", json={"episode_id": "a"})
    assert busy.post("/reset", json={"episode_id": "c"}).status_code == 200
    idle = serve(max_episodes=1, idle_s=0)
    idle.post("/reset", json={"episode_id": "old"})
    assert idle.post("/reset", json={"episode_id": "new"}).status_code == 200
    assert idle.get("/state", params={"episode_id": "old"}).status_code == 404


def test_a_body_over_the_bound_is_refused_unread(serve):
    client = serve(max_body_bytes=1000)
    response = client.post("/reset", json={"episode_id": "e", "pad": "x" * 2000})
    assert response.status_code == 413


def test_the_command_refuses_a_bad_environment_config_before_listening(capsys):
    assert main(["env-server", "frozenlake", "--port", "0", "--config", '{"size": 1}']) == 2
    assert "size must be a whole number" in capsys.readouterr().err
    assert main(["env-server", "sokoban", "--port", "0", "--config", '{"colour": "red"}']) == 2
