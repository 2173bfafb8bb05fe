"""Rollouts through a real environment server (`python -m trainers env-server`) equal the in-process game's,
token for token, reward for reward, anchor state for anchor state; a server that dies mid-episode ends the
trajectory's episode with an error observation and a metric, and the rollout goes on.

The policy is scripted over the tiny tokenizer: its next message is a deterministic function of everything
it has read (grids included), so the two rollouts agree only if every observation agrees. An untrained tiny
model seldom writes a well-formed call, which would leave the environment unplayed.
"""

from __future__ import annotations

import hashlib
import json

import pytest

from tests.support.env_server import env_server
from trainers.config.limits import RolloutLimits
from trainers.metrics import keys
from trainers.metrics.step_metrics import compute_step_metrics
from trainers.net import ALLOW_ENV
from trainers.rollout.engine import RolloutEngine
from trainers.tools.toolset import Toolset
from trainers.trajectory import Trajectory

LAKE = {"name": "frozenlake", "config": {"describe": True, "max_steps": 6, "invalid_action_penalty": -0.5}}
ROWS = [
    {"id": "seeded", "question": "reach G"},  # the level from the rollout's seed
    {"id": "six", "question": "reach G", "initial_state": {"seed": 11, "size": 6}},
    {"id": "grid", "question": "reach G", "initial_state": {"grid": ["P_O", "__G"]}},
    *({"id": f"level{n}", "question": "reach G", "initial_state": {"seed": n}} for n in range(5)),
]
MOVES = ("up", "down", "left", "right")


def call(arguments: dict) -> str:
    return f"<tool_call>{json.dumps({'name': 'frozenlake', 'arguments': arguments})}</tool_call>"


def policy(prompt: str) -> str:
    """A message chosen by a hash of the whole context: one move, several, two calls, a bad call or none."""
    h = hashlib.sha256(prompt.encode()).digest()
    move, other = MOVES[h[1] % 4], MOVES[h[2] % 4]
    choice = h[0] % 10
    if choice < 5:
        text = call({"action": move})
    elif choice < 7:
        text = call({"action": f"{move} || {other}"})
    elif choice == 7:
        text = call({"actions": [move]}) + call({"action": other})
    elif choice == 8:
        text = call({"action": "jump"})
    else:
        text = "<think>stuck</think>I stop here."
    return text + "<|im_end|>"


def server_binding(url: str) -> dict:
    """The env_server tool shown to the policy exactly as the in-process tool is."""
    spec = Toolset.build([LAKE]).specs()[0]["function"]
    config = {"url": url, "name": spec["name"], "description": spec["description"], "actions": list(MOVES),
              "invalid_action_penalty": -0.5}  # fmt: skip
    return {"name": "env_server", "config": config}


def rollout(backend, binding: dict, rows: list[dict] = ROWS) -> list[Trajectory]:
    engine = RolloutEngine(backend, "qwen_tool", [binding], RolloutLimits(max_turns=6))
    return engine.run(rows, samples_per_prompt=2, seed=3)


def turns(traj: Trajectory) -> list[tuple]:
    return [
        (t.role, t.text, t.token_ids, t.loss_mask, t.state_hash, t.state, t.env_reward) for t in traj.turns
    ]


def test_a_rollout_through_the_server_is_the_in_process_rollout(scripted):
    local = rollout(scripted(policy), LAKE)
    with env_server("frozenlake", "--describe", "--max-steps", "6") as server:
        remote = rollout(scripted(policy), server_binding(server.url))
    assert [t.uid for t in remote] == [t.uid for t in local]
    for mine, theirs in zip(remote, local, strict=True):
        assert mine.prompt_text == theirs.prompt_text
        assert turns(mine) == turns(theirs)
        assert mine.token_ids == theirs.token_ids and mine.finish_reason == theirs.finish_reason
        assert [r.output for r in mine.tool_results] == [r.output for r in theirs.tool_results]
    played = [t for traj in remote for t in traj.assistant_turns if t.env_reward is not None]
    assert len(played) > 20 and {t.finish_reason for t in remote} >= {"env_done", "eos"}  # games were played
    metrics = compute_step_metrics(remote)
    assert metrics[keys.server_errors_key("frozenlake")] == 0.0 and metrics[keys.TOOL_SERVER_ERRORS] == 0.0


def test_a_server_killed_mid_episode_ends_each_episode_with_an_error_and_the_rollout_goes_on(scripted):
    with env_server("frozenlake", "--describe", "--max-steps", "6") as server:

        def respond(prompt: str) -> str:
            if prompt.count("<tool_response>") == 1 and server.process.poll() is None:
                server.kill()  # after every trajectory's first move was answered
            return call({"action": "right"}) + "<|im_end|>"

        binding = server_binding(server.url)
        rows = [{"id": "a", "question": "go", "initial_state": {"grid": ["P___", "___G"]}}]
        trajectories = rollout(scripted(respond), binding, rows)
        restarted = rollout(scripted(respond), binding, rows)  # the server is gone before the reset
    for traj in trajectories:
        first, second = traj.tool_results
        assert first.ok and second.output.startswith("frozenlake: environment server error: request failed")
        assert traj.finish_reason == "env_done" and len(traj.assistant_turns) == 2
        assert (
            traj.assistant_turns[1].state
            == "_P__\n___G\nup edge, down ice, left ice, right ice; goal 1 down 2 right"
        )
    for traj in restarted:
        assert "environment server error" in traj.prompt_text and traj.finish_reason == "env_done"
    for batch in (trajectories, restarted):  # one failed call in each of the 2 trajectories
        assert compute_step_metrics(batch)[keys.server_errors_key("frozenlake")] == 2.0


def build_lake_policy(out, settings: dict) -> None:
    """A tiny model SFT'd on FrozenLake expert plays (the demo's game, with its surroundings line)."""
    from trainers.demo.frozenlake import lake_game
    from trainers.demo.model import build_demo_model
    from trainers.demo.multiturn import level_rows, make_experts
    from trainers.models.model_io import load_policy
    from trainers.templates import TEMPLATES
    from trainers.training.sft import render_experts, sft_train

    game = lake_game()
    records = make_experts(game, level_rows(game, "lake", 200), settings["experts"], imperfect=0.0, slip=0.0)
    template, tools = TEMPLATES.get("qwen_tool")(), game.toolset().specs()
    base = build_demo_model(out / "base", records, template=template, tools=tools, **settings["model"])
    model, tokenizer = load_policy(base)
    examples = render_experts(records, template=template, tokenizer=tokenizer, tools=tools)
    sft_train(model, examples, pad_token_id=tokenizer.pad_token_id, **settings["sft"])
    model.save_pretrained(out / "sft")
    tokenizer.save_pretrained(out / "sft")


@pytest.mark.slow
def test_an_sft_policy_sampled_with_seeds_plays_the_same_through_the_server(request, tmp_path_factory):
    """A real policy at temperature 1 (per-turn seeds): the same tokens, moves, rewards and anchor states."""
    import torch

    from tests.support.trained_cache import trained
    from trainers.backends.hf import HFBackend
    from trainers.config.sampling import SamplingParams
    from trainers.demo.frozenlake import lake_game
    from trainers.demo.multiturn import level_rows, limits, served
    from trainers.models.model_io import load_policy

    torch.set_num_threads(1)
    settings = {
        "experts": 96,
        "model": {"hidden_size": 64, "num_layers": 2, "num_heads": 2, "num_kv_heads": 1},
        "sft": {"steps": 120, "batch_size": 16, "lr": 3e-3},
    }
    model, tokenizer = load_policy(
        trained(request, tmp_path_factory, "lake_policy", settings, build_lake_policy) / "sft"
    )
    game, rows = lake_game(), level_rows(lake_game(), "held", 8, held_out=True)

    def play(binding: dict) -> list[Trajectory]:
        backend, bounds = HFBackend(model, tokenizer), RolloutLimits(**limits(game))
        engine = RolloutEngine(backend, "qwen_tool", [binding], bounds, SamplingParams(temperature=1.0))
        return engine.run(rows, samples_per_prompt=4, seed=7)

    local = play(game.binding())
    with env_server("frozenlake", "--describe") as server, pytest.MonkeyPatch.context() as patch:
        patch.setenv(ALLOW_ENV, "")  # `served` widens it
        remote = play(served(game, server.url).rollout_binding())
    for mine, theirs in zip(remote, local, strict=True):
        assert turns(mine) == turns(theirs) and mine.finish_reason == theirs.finish_reason
    moves = [t for traj in remote for t in traj.assistant_turns if t.env_reward is not None]
    assert (
        len(moves) > 2 * len(remote) and len({t.state_hash for t in moves}) > 16
    )  # it played, from many states
