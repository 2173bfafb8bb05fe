import pytest
from pydantic import TypeAdapter, ValidationError

from trainers.rewards.schedules import Schedule

SCHEDULE = TypeAdapter(Schedule)


def at(spec, step, total=None):
    return SCHEDULE.validate_python(spec).value_at(step, total)


def test_constant():
    assert at({"name": "constant", "value": 0.3}, 99) == 0.3


def test_linear_ramps_then_holds():
    spec = {"name": "linear", "start": 0.0, "end": 1.0, "start_step": 10, "steps": 20}
    assert at(spec, 0) == 0.0
    assert at(spec, 20) == pytest.approx(0.5)
    assert at(spec, 100) == 1.0


def test_linear_defaults_to_the_run_length():
    assert at({"name": "linear", "start": 1.0, "end": 0.0}, 25, total=100) == pytest.approx(0.75)


def test_step_schedule_changes_at_boundaries():
    spec = {"name": "step", "boundaries": [10, 30], "values": [1.0, 0.5, 0.1]}
    assert [at(spec, s) for s in (0, 9, 10, 29, 30, 1000)] == [1.0, 1.0, 0.5, 0.5, 0.1, 0.1]


def test_step_schedule_shapes_are_checked():
    with pytest.raises(ValidationError, match="one more"):
        SCHEDULE.validate_python({"name": "step", "boundaries": [10], "values": [1.0]})
    with pytest.raises(ValidationError, match="ascending"):
        SCHEDULE.validate_python({"name": "step", "boundaries": [10, 5], "values": [1.0, 2.0, 3.0]})


def test_toolrl_dynamic_moves_format_from_2_to_1_and_correctness_range_from_2_to_3():
    fmt = {"name": "toolrl_dynamic", "part": "format", "steps": 150}
    cor = {"name": "toolrl_dynamic", "part": "correct", "steps": 150}
    assert [at(fmt, s) for s in (0, 75, 150, 300)] == pytest.approx([2.0, 1.5, 1.0, 1.0])
    # as multipliers of R_correct in [-3, 3]: its maximum goes 2 -> 2.5 -> 3
    assert [3 * at(cor, s) for s in (0, 75, 150, 300)] == pytest.approx([2.0, 2.5, 3.0, 3.0])


def test_unknown_schedule_name_is_an_error():
    with pytest.raises(ValidationError, match="cosine"):
        SCHEDULE.validate_python({"name": "cosine"})
