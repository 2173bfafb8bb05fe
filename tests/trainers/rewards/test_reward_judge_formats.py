"""The judge's strict formats: a score line, a ranking line, and the exact rewards of a ranking."""

import pytest

from trainers.rewards.judge_formats import FormatError, parse_ranking, parse_score, ranking_rewards


@pytest.mark.parametrize(
    ("text", "score"),
    [("SCORE: 7", 7.0), ("The answer is right.\nSCORE: 10\n", 10.0), ("  SCORE:0", 0.0), ("SCORE: 2.5", 2.5)],
)
def test_a_score_line_is_read(text, score):
    assert parse_score(text) == score


@pytest.mark.parametrize(
    ("text", "why"),
    [
        ("7/10", "expected one SCORE: line, found 0"),
        ("SCORE: 3\nSCORE: 4", "expected one SCORE: line, found 2"),
        ("SCORE: seven", "malformed SCORE: line"),
        ("SCORE: -1", "malformed SCORE: line"),
        ("SCORE: 11", "score 11 is above 10"),
        ("score: 5", "expected one SCORE: line, found 0"),
    ],
)
def test_anything_else_is_a_format_error(text, why):
    with pytest.raises(FormatError, match=why):
        parse_score(text)


def test_a_ranking_line_is_read_into_tiers():
    assert parse_ranking("Candidate 3 is best.\nRANKING: 3 > 1 = 4 > 2", 4) == [[3], [1, 4], [2]]
    assert parse_ranking("RANKING:2>1", 2) == [[2], [1]]


@pytest.mark.parametrize(
    "text",
    [
        "RANKING: 1 > 2",
        "RANKING: 1 > 2 > 2 > 3",
        "RANKING: 1 > 2 > 3 > 4",
        "RANKING: 1, 2, 3",
        "3 > 2 > 1",
        "RANKING:",
    ],
)
def test_a_ranking_must_name_every_candidate_once(text):
    with pytest.raises(FormatError):
        parse_ranking(text, 3)


@pytest.mark.parametrize(
    ("tiers", "n", "rewards"),
    [
        ([[2], [3], [1]], 3, [0.0, 1.0, 0.5]),  # best 1, worst 0, evenly spaced
        ([[3], [1, 4], [2]], 4, [0.5, 0.0, 1.0, 0.5]),  # ties share the mean of 2/3 and 1/3
        ([[1, 2, 3]], 3, [0.5, 0.5, 0.5]),
        ([[1], [2]], 2, [1.0, 0.0]),
        ([[4], [3], [2], [1], [5]], 5, [0.25, 0.5, 0.75, 1.0, 0.0]),
        ([[1]], 1, [1.0]),
    ],
)
def test_ranks_map_to_rewards_exactly(tiers, n, rewards):
    assert ranking_rewards(tiers, n) == rewards
