"""When a run evaluates its policy: every `every_steps`-th step and the last one (the loop's inline
evaluator and the workbench's evaluation jobs both ask `evaluation_due`), and the checkpoint period that
gives evaluation jobs a checkpoint at each of those steps."""

from trainers.config.sections import EvaluationConfig
from trainers.training.eval_schedule import checkpoint_period, evaluation_due


def due_steps(every_steps: int, steps: int) -> list[int]:
    return [step for step in range(1, steps + 1) if evaluation_due(every_steps, step, last=step == steps)]


def test_every_nth_step_and_the_last_are_due():
    assert due_steps(2, 5) == [2, 4, 5]
    assert due_steps(5, 10) == [5, 10]
    assert due_steps(0, 4) == [4]  # 0: only at the end


def test_a_run_stopped_early_is_evaluated_where_it_stopped():
    assert evaluation_due(4, 3, last=True) and not evaluation_due(4, 3, last=False)


def test_evaluation_jobs_get_a_checkpoint_at_every_due_step():
    assert checkpoint_period(50, EvaluationConfig(every_steps=20)) == 50  # inline: the checkpoint's own
    jobs = EvaluationConfig(every_steps=20, runner="jobs")
    period = checkpoint_period(50, jobs)
    assert period == 10
    assert all(step % period == 0 for step in due_steps(20, 100))
    assert checkpoint_period(50, EvaluationConfig(every_steps=0, runner="jobs")) == 50  # the last step only
