from trainers.rewards import REWARDS, RewardContext
from trainers.trajectory import ToolResult

CTX = RewardContext()
TORL = REWARDS.get("torl")()
FAILED = ToolResult("python", ok=False, output="NameError: name 'a' is not defined")


def test_correct_answer_scores_plus_one(make_traj):
    assert TORL.score(make_traj(final_answer="4", ground_truth={"answer": "4"}), CTX) == 1.0


def test_wrong_answer_scores_minus_one(make_traj):
    assert TORL.score(make_traj(final_answer="5", ground_truth={"answer": "4"}), CTX) == -1.0


def test_failed_code_costs_an_extra_half(make_traj):
    right = make_traj(final_answer="4", ground_truth={"answer": "4"}, results=[FAILED])
    wrong = make_traj(final_answer="5", ground_truth={"answer": "4"}, results=[FAILED])
    assert TORL.score(right, CTX) == 0.5
    assert TORL.score(wrong, CTX) == -1.5


def test_code_skipped_past_the_call_budget_is_not_a_failure(make_traj):
    skipped = ToolResult("python", ok=False, output="", executed=False)
    traj = make_traj(final_answer="4", ground_truth={"answer": "4"}, results=[skipped])
    assert TORL.score(traj, CTX) == 1.0


def test_penalty_can_be_switched_off(make_traj):
    traj = make_traj(final_answer="5", ground_truth={"answer": "4"}, results=[FAILED])
    assert REWARDS.get("torl")(failed_code_penalty=0.0).score(traj, CTX) == -1.0
