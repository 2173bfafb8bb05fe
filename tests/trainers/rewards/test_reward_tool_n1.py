from trainers.rewards import REWARDS, RewardContext
from trainers.trajectory import ToolCall

CTX = RewardContext()
N1 = REWARDS.get("tool_n1")()
TRUTH = {
    "tool_calls": [
        {"name": "book", "arguments": {"city": "Oslo", "nights": 2}},
        {"name": "ping", "arguments": {}},
    ]
}
TEXT = (
    '<think>book then ping</think>\n<tool_call>\n{"name": "ping", "arguments": {}}\n</tool_call>\n'
    '<tool_call>\n{"name": "book", "arguments": {"nights": 2, "city": "Oslo"}}\n</tool_call>'
)
CALLS = [ToolCall("ping", {}), ToolCall("book", {"nights": 2, "city": "Oslo"})]


def test_right_format_and_equal_calls_score_one_regardless_of_order(make_traj):
    assert N1.score(make_traj(TEXT, TRUTH, calls=CALLS), CTX) == 1.0


def test_a_wrong_argument_scores_zero(make_traj):
    calls = [ToolCall("ping", {}), ToolCall("book", {"nights": 3, "city": "Oslo"})]
    assert N1.score(make_traj(TEXT, TRUTH, calls=calls), CTX) == 0.0


def test_a_missing_or_extra_call_scores_zero(make_traj):
    assert N1.score(make_traj(TEXT, TRUTH, calls=CALLS[:1]), CTX) == 0.0
    assert N1.score(make_traj(TEXT, TRUTH, calls=[*CALLS, ToolCall("ping", {})]), CTX) == 0.0


def test_right_calls_without_reasoning_first_score_zero(make_traj):
    text = TEXT.replace("<think>book then ping</think>\n", "")
    assert N1.score(make_traj(text, TRUTH, calls=CALLS), CTX) == 0.0


def test_text_after_the_calls_breaks_the_format(make_traj):
    assert N1.score(make_traj(TEXT + "\nDone!", TRUTH, calls=CALLS), CTX) == 0.0


def test_no_call_expected_and_none_made_scores_one(make_traj):
    assert N1.score(make_traj("<think>just chat</think> Hello!", {"tool_calls": []}), CTX) == 1.0
