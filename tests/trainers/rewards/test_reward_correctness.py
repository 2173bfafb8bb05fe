import pytest
from pydantic import ValidationError

from trainers.rewards import REWARDS, RewardContext
from trainers.rewards.correctness import CorrectnessParams, answers_match, predicted_answer
from trainers.rewards.math_check import math_verify_equal, sympy_equal

CTX = RewardContext()


def score(traj, **params):
    return REWARDS.get("correctness")(**params).score(traj, CTX)


def test_math_mode_accepts_equivalent_forms(make_traj):
    assert score(make_traj(final_answer="0.5", ground_truth={"answer": "\\frac{1}{2}"})) == 1.0


def test_math_mode_rejects_a_different_value(make_traj):
    assert score(make_traj(final_answer="3", ground_truth={"answer": "4"})) == 0.0


def test_math_mode_reads_expressions_not_their_first_number():
    assert answers_match("1+x", "x+1", CorrectnessParams())
    assert not answers_match("1+x", "1", CorrectnessParams())


def test_missing_answer_scores_incorrect_value(make_traj):
    assert score(make_traj("no answer here", {"answer": "4"}), incorrect=-1.0) == -1.0


def test_answer_falls_back_to_last_boxed_then_answer_tag(make_traj):
    assert predicted_answer(make_traj("first \\boxed{1} then \\boxed{2}")) == "2"
    assert predicted_answer(make_traj("<answer>7</answer>")) == "7"


def test_exact_mode_ignores_case_and_spacing_unless_asked(make_traj):
    traj = make_traj(final_answer="  New   York ", ground_truth={"answer": "new york"})
    assert score(traj, mode="exact") == 1.0
    assert score(traj, mode="exact", case_sensitive=True) == 0.0


def test_numeric_mode_uses_the_tolerance(make_traj):
    traj = make_traj(final_answer="3.1416", ground_truth={"answer": "3.14159"})
    assert score(traj, mode="numeric", rel_tol=1e-4) == 1.0
    assert score(traj, mode="numeric", rel_tol=1e-7) == 0.0


def test_numeric_mode_reads_fractions_and_thousands_separators():
    params = CorrectnessParams(mode="numeric")
    assert answers_match("1/4", "0.25", params)
    assert answers_match("1,000", "1000", params)


def test_sympy_fallback_proves_algebraic_equality():
    assert sympy_equal("(x+1)^2", "x^2 + 2*x + 1")
    assert not sympy_equal("(x+1)^2", "x^2 + 1")


def test_sympy_fallback_refuses_code():
    assert not sympy_equal("__import__('os').getcwd()", "1")
    assert not sympy_equal("exit()", "exit()")


def test_bad_params_are_rejected():
    with pytest.raises(ValidationError, match="mode"):
        REWARDS.get("correctness")(mode="fuzzy")
    with pytest.raises(ValidationError, match="tolerance_x"):
        REWARDS.get("correctness")(tolerance_x=1)


def test_prose_answer_to_a_numeric_question_is_wrong_without_parsing():
    assert not answers_match("garbage text 1", "12", CorrectnessParams())
    assert answers_match("\\frac{24}{2}", "12", CorrectnessParams())  # LaTeX commands are not prose


def test_plain_numbers_compare_to_six_digits_like_math_verify():
    assert answers_match("0.3333333", "1/3", CorrectnessParams())
    assert not answers_match("0.33", "1/3", CorrectnessParams())


def test_overlong_answers_are_not_parsed():
    assert not answers_match("1+" * 150 + "1", "151", CorrectnessParams())


# A comma is a thousands separator only before a group of exactly three digits, after 1-3 leading ones:
# 1,234 = 1 * 1000 + 234 = 1234; 12,345,678 = 12 * 10**6 + 345 * 1000 + 678 = 12345678;
# -1,234.5 = -(1234 + 0.5); "1,000." ends in punctuation, 1 * 1000 + 000 = 1000.
THOUSANDS_EQUAL = [
    ("1,234", "1234"),
    ("1234", "1,234"),
    ("12,345,678", "12345678"),
    ("-1,234.5", "-1234.5"),
    ("1,000.", "1000"),
    ("$1,234", "1234"),
]
# Not thousands groups, so not one number: "1,2" would be 12 only if the comma were dropped (1 * 10 + 2),
# but a group after a comma needs three digits ("2" has one, "23" two, "2345" four, "34" in 12,34,567
# two, "56" in 1,234,56 two); "1234,567" leads with four digits; "0,123" has a leading zero (math-verify
# reads it as the decimal 0.123); "1, 234" has a space. math-verify reads each as a set or tuple.
COMMA_NOT_THOUSANDS = [
    ("1,2", "12"),
    ("12", "1,2"),
    ("1,23", "123"),
    ("1,2345", "12345"),
    ("12,34,567", "1234567"),
    ("1,234,56", "123456"),
    ("1234,567", "1234567"),
    ("0,123", "123"),
    ("1, 234", "1234"),
]


@pytest.mark.parametrize(("pred", "gold"), THOUSANDS_EQUAL)
def test_thousands_separators_in_their_places_are_read_as_one_number(pred, gold):
    assert answers_match(pred, gold, CorrectnessParams())
    assert answers_match(pred, gold, CorrectnessParams(mode="numeric"))


@pytest.mark.parametrize(("pred", "gold"), COMMA_NOT_THOUSANDS)
def test_commas_out_of_thousands_places_do_not_join_digits(pred, gold):
    assert not answers_match(pred, gold, CorrectnessParams())
    assert not answers_match(pred, gold, CorrectnessParams(mode="numeric"))


def test_comma_cases_agree_with_math_verify():
    for pred, gold in THOUSANDS_EQUAL:
        assert math_verify_equal(pred, gold), (pred, gold)
    for pred, gold in COMMA_NOT_THOUSANDS:
        assert not math_verify_equal(pred, gold), (pred, gold)


def test_a_list_still_matches_itself():
    assert answers_match("1,2", "1,2", CorrectnessParams())
    assert answers_match("1,2", "2, 1", CorrectnessParams())  # math-verify compares them as sets
