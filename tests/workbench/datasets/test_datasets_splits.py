import pytest

from workbench.datasets.splits import EVAL, TRAIN, eval_indices, split_from_value


def test_ratio_split_is_exact_and_seeded():
    first = eval_indices(200, 0.1, seed=7)
    assert len(first) == 20
    assert first == eval_indices(200, 0.1, seed=7)
    assert first != eval_indices(200, 0.1, seed=8)
    assert first == sorted(set(first)) and all(0 <= i < 200 for i in first)


def test_ratio_must_leave_training_rows():
    with pytest.raises(ValueError, match=r"\[0, 1\)"):
        eval_indices(10, 1.0, seed=0)


def test_column_values():
    assert split_from_value(" Train ") == TRAIN
    assert split_from_value("validation") == EVAL
    with pytest.raises(ValueError, match="split value 'holdout' is not one of"):
        split_from_value("holdout")
