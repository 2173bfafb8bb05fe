"""Answer checks never hang: the cost guard refuses power towers, the worker's bounds end the rest."""

from __future__ import annotations

import pytest

from trainers.bounded import BoundsExceeded, Limits
from trainers.rewards import REWARDS, RewardContext, RewardDefinition, correctness
from trainers.rewards.correctness import CorrectnessParams, answers_match, check_answer
from trainers.rewards.math_check import too_costly

pytestmark = pytest.mark.timeout(300)  # without the bounds these checks run for hours
TOWER = "9^9^9^9"
HUGE_FACTORIAL = "(9^{9})!"  # 387420489!: passes the guard, only the worker's bounds stop it


@pytest.fixture
def short_bounds(monkeypatch):
    """One CPU second per check (the shipped five only make these tests slower); no cached verdicts."""
    monkeypatch.setattr(correctness.CHECKER, "limits", Limits(cpu_s=1, wall_s=300, output_bytes=1024))
    correctness._symbolic_check.cache_clear()
    yield
    correctness._symbolic_check.cache_clear()


def score(traj) -> float:
    return REWARDS.get("correctness")().score(traj, RewardContext())


@pytest.mark.parametrize(
    "text",
    [
        TOWER,
        "9^{9^{9^{9}}}",
        "(9^9)^(9^9)",
        "9**9**9**9",
        "2^{99999}",
        "10^{-100000}",
        "99999999!",
        "1e99999999",
    ],
)
def test_the_guard_refuses_answers_too_large_to_evaluate(text):
    assert too_costly(text) is not None


@pytest.mark.parametrize("text", ["2^{10}", "10^{100}", "2^{2^{10}}", "x^{2^n}", "e^{-x^2}", "100!", "1.5e3"])
def test_the_guard_lets_ordinary_answers_through(text):
    assert too_costly(text) is None


def test_the_attack_string_scores_zero_with_a_note_and_no_worker(make_traj):
    traj = make_traj(f"\\boxed{{{TOWER}}}", {"answer": "1"})
    assert score(traj) == 0.0
    assert traj.metadata["notes"] == [f"answer check refused: the power {TOWER} has more than 10000 digits"]


@pytest.mark.slow
def test_the_worker_alone_bounds_the_attack_string(short_bounds):
    with pytest.raises(BoundsExceeded, match="exceeded 1 s of CPU time") as caught:
        correctness.CHECKER.call(correctness.SYMBOLIC_EQUAL, TOWER, "1")  # no guard on this path
    assert caught.value.kind == "time"


@pytest.mark.slow
def test_an_answer_the_guard_misses_times_out_to_zero_with_a_note(short_bounds, make_traj):
    traj = make_traj(f"\\boxed{{{HUGE_FACTORIAL}}}", {"answer": "1"})
    assert score(traj) == 0.0
    assert traj.metadata["notes"] == ["answer check timed out: exceeded 1 s of CPU time"]


@pytest.mark.slow
def test_one_hostile_sample_leaves_its_training_group_scored(short_bounds, make_traj):
    texts = [f"\\boxed{{{HUGE_FACTORIAL}}}", "\\boxed{2+2}", f"\\boxed{{{TOWER}}}", "\\boxed{\\frac{8}{2}}"]
    group = [make_traj(text, {"answer": "4"}, group_id="g") for text in texts]
    RewardDefinition.model_validate({"components": [{"name": "correctness"}]}).compute(group, RewardContext())
    assert [t.reward for t in group] == [0.0, 1.0, 0.0, 1.0]
    assert [len(t.metadata.get("notes", [])) for t in group] == [1, 0, 1, 0]


@pytest.mark.slow
def test_a_timed_out_pair_is_not_checked_twice(short_bounds):
    first = check_answer(HUGE_FACTORIAL, "1", CorrectnessParams())
    assert check_answer(HUGE_FACTORIAL, "1", CorrectnessParams()) is first  # cached, no second timeout


@pytest.mark.slow
def test_numbers_with_huge_decimal_exponents_are_not_built():
    # Fraction("1e99999999") builds 10**99999999 (minutes); 1e999 overflowed float() and raised
    for mode in ("numeric", "math"):
        assert not answers_match("1e99999999", "1", CorrectnessParams(mode=mode))
        assert not answers_match("1e999", "1", CorrectnessParams(mode=mode))
