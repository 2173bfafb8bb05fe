"""How agent episodes end: crashes, hangs, silence and spent budgets end the episode with a reason and
reward 0 while the rest of the rollout goes on; edited histories and `n` choices become their own
segments; the program reaches its session and nothing else."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.trainers.agent.conftest import calls_then_answer
from trainers.rewards import RewardContext, RewardDefinition

REPO = Path(__file__).resolve().parents[3]
MODES = ["crash", "hang", "silent", "greedy", "edit", "choices", "probe"]


@pytest.fixture(scope="module")
def episodes(request):
    """Every mode's episode from one rollout (the hang's wall limit bounds its time)."""
    rollouts, backend = request.getfixturevalue("agent_rollouts")(
        "modes.py", calls_then_answer(0), wall_s=4.0, max_turns=3
    )
    rows = [
        {"id": mode, "question": "What is 2+2?", "answer": "4", "mode": mode, "project": str(REPO)}
        for mode in MODES
    ]
    trajectories = rollouts.run(rows, 1, seed=0)
    return {mode: [t for t in trajectories if t.group_id == mode] for mode in MODES}, rollouts


def test_each_failure_has_its_reason_and_reward_zero(episodes):
    by_mode, rollouts = episodes
    reasons = {mode: by_mode[mode][0].metadata["failure"] for mode in MODES}
    assert reasons == {"crash": "crash", "hang": "timeout", "silent": "no_calls", "greedy": "turn_limit",
                       "edit": None, "choices": None, "probe": None}  # fmt: skip
    definition = RewardDefinition.model_validate(
        {"components": [{"name": "correctness", "params": {"mode": "numeric"}}]}
    )
    flat = [t for trajectories in by_mode.values() for t in trajectories]
    definition.compute(flat, RewardContext())
    assert by_mode["silent"][0].final_answer == "4" and by_mode["silent"][0].reward == 0.0
    assert all(t.reward == 0.0 for mode in ("crash", "hang", "greedy") for t in by_mode[mode])
    assert by_mode["edit"][0].reward == 1.0  # the episodes that worked still score
    metrics = rollouts.last_metrics
    assert metrics["agent/episodes"] == len(MODES) and metrics["agent/failed"] == 4
    assert {k: metrics[f"agent/failures/{k}"] for k in ("crash", "timeout", "no_calls", "turn_limit")} == {
        "crash": 1, "timeout": 1, "no_calls": 1, "turn_limit": 1}  # fmt: skip


def test_the_inspector_gets_the_programs_log(episodes):
    by_mode, _ = episodes
    crash = by_mode["crash"][0].metadata["agent"]["log"]
    assert crash["status"] == "error" and "the agent's own bug" in crash["error"]
    assert "RuntimeError" in crash["stderr"]
    assert by_mode["edit"][0].metadata["agent"]["log"]["stdout"] == ""  # the program printed nothing
    assert by_mode["silent"][0].turns[0].role == "prompt" and len(by_mode["silent"][0].turns) == 1


def test_an_edited_history_is_its_own_segment(episodes):
    by_mode, _ = episodes
    first, second = by_mode["edit"]
    assert [t.role for t in first.turns] == ["prompt", "assistant"]
    assert "another question" in second.turns[0].text and "another question" not in first.turns[0].text
    assert [t.role for t in second.turns] == ["prompt", "assistant"]  # the edited history is all prompt
    assert (first.uid, second.uid) == ("edit/0", "edit/0~1")


def test_n_choices_are_sampled_and_kept_apart(episodes):
    by_mode, _ = episodes
    assert len(by_mode["choices"]) == 3
    prompts = {tuple(t.turns[0].token_ids) for t in by_mode["choices"]}
    assert len(prompts) == 1


def test_the_program_reaches_its_session_and_nothing_else(episodes):
    by_mode, _ = episodes
    probe = by_mode["probe"][0]
    assert probe.metadata["failure"] is None
    assert probe.metadata["agent"]["result"] == {"internet": False, "loopback": False, "project": False}
