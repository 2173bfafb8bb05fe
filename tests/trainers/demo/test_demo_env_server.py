"""The multi-turn demo through an environment server (`--env-server URL`): the policy sees the tool it sees
in-process, and a server that is missing or serves another game or config is refused before any work."""

from __future__ import annotations

import pytest

from tests.support.env_server import env_server
from trainers.cli import main
from trainers.demo.games import multiturn_recipe
from trainers.demo.multiturn import served
from trainers.net import ALLOW_ENV
from trainers.tools.toolset import Toolset


@pytest.fixture(autouse=True)
def allowlist(monkeypatch):
    """`served` widens this process's allowlist; the test's changes are undone afterwards."""
    monkeypatch.setenv(ALLOW_ENV, "")


@pytest.mark.parametrize("env", ["frozenlake", "sokoban"])
def test_through_a_server_rl_and_evaluation_show_the_policy_the_in_process_tool(env):
    game, _ = multiturn_recipe(env)
    with env_server(env, "--describe") as server:
        remote = served(game, server.url)
    binding = remote.rollout_binding()
    assert binding["name"] == "env_server" and binding["config"]["url"] == server.url
    assert Toolset.build([binding]).specs() == game.toolset().specs()
    assert binding["config"]["invalid_action_penalty"] == game.toolset().environment.invalid_action_penalty
    assert game.rollout_binding() == game.binding()  # no server: the in-process tool


def test_a_server_of_another_game_or_config_is_refused_naming_the_command_that_would_serve(tmp_path, capsys):
    out = tmp_path / "run"
    with env_server("frozenlake") as server:  # no --describe, which the recipe's lake has
        assert main(["demo", "--env", "frozenlake", "--env-server", server.url, "--out", str(out)]) == 2
        wrong_game = main(["demo", "--env", "sokoban", "--env-server", server.url, "--out", str(out)])
    err = capsys.readouterr().err
    assert wrong_game == 2 and "serves frozenlake with {}, not frozenlake with {'describe': True}" in err
    assert """python -m trainers env-server frozenlake --config '{"describe": true}'""" in err
    assert "not sokoban" in err and not out.exists()
    assert main(["demo", "--env", "frozenlake", "--env-server", "http://127.0.0.1:9", "--out", str(out)]) == 2
    assert "host not reachable or not allowed" in capsys.readouterr().err
