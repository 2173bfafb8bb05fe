"""What a normal snippet gets back: output, the REPL value, the last traceback line, timing."""

from __future__ import annotations

import pytest

from tests.support.polling import wait_for
from trainers.sandbox import SandboxError, SandboxLimits, WorkerPool


def test_prints_output_and_reports_ok(pool: WorkerPool) -> None:
    result = pool.run("print(6 * 7)")
    assert (result.status, result.stdout, result.error_line) == ("ok", "42\n", "")


def test_final_expression_is_printed_like_a_repl(pool: WorkerPool) -> None:
    assert pool.run("x = [1, 2]\nx + [3]").stdout == "[1, 2, 3]\n"


def test_exception_reports_last_traceback_line(pool: WorkerPool) -> None:
    result = pool.run("print('before')\n1 / 0")
    assert result.status == "error"
    assert result.stdout == "before\n"
    assert result.error_line == "ZeroDivisionError: division by zero"
    assert "Traceback" in result.stderr


def test_syntax_error_is_an_error_result(pool: WorkerPool) -> None:
    result = pool.run("def broken(:\n")
    assert result.status == "error"
    assert result.error_line.startswith("SyntaxError")


def test_nonzero_exit_is_an_error(pool: WorkerPool) -> None:
    result = pool.run("import sys; sys.exit(3)")
    assert (result.status, result.error_line) == ("error", "SystemExit: 3")


def test_globals_do_not_survive_between_calls(pool: WorkerPool) -> None:
    pool.run("leak = 1")
    assert pool.run("print('leak' in globals())").stdout == "False\n"


def test_scratch_directory_is_writable_and_fresh(pool: WorkerPool) -> None:
    first = pool.run("open('note.txt', 'w').write('hi'); print(open('note.txt').read())")
    second = pool.run("import os; print(os.path.exists('note.txt'))")
    assert first.stdout == "hi\n"
    assert second.stdout == "False\n"


def test_each_call_is_served_by_a_worker_started_before_it() -> None:
    """The pool starts a replacement on its own while a call runs, and the next call takes that one, so
    no call waits for a worker to start (the latency this saves: tests/benchmarks/bench_sandbox.py)."""
    log: list[tuple[str, object]] = []

    class Observed(WorkerPool):  # a subclass, so other pools' refill threads stay out of the log
        def _spawn(self):
            worker = super()._spawn()
            log.append(("spawned", worker))
            return worker

        def _run(self, worker, code: str):
            log.append(("served", worker))
            return super()._run(worker, code)

    def spawns() -> int:
        return sum(kind == "spawned" for kind, _ in log)

    one = Observed(SandboxLimits(wall_s=2.0), size=1)
    try:
        for i in range(3):
            # a wait for the refill thread, not a speed claim
            wait_for(lambda i=i: spawns() > i, 30, "the pool to start a worker before the call", every=0.01)
            assert spawns() == i + 1, "the pool started more than one worker for the call"
            log.append(("call", i))
            assert one.run(f"print({i})").stdout == f"{i}\n"
    finally:
        one.close()
    for i in range(3):
        call = log.index(("call", i))
        worker = next(w for kind, w in log[call:] if kind == "served")
        assert log.index(("spawned", worker)) < call
    assert len({id(w) for kind, w in log if kind == "served"}) == 3  # one worker per call


def test_os_exit_is_judged_by_its_exit_code(pool: WorkerPool) -> None:
    assert pool.run("import os\nprint('bye', flush=True)\nos._exit(0)").status == "ok"
    assert (pool.run("import os; os._exit(4)").error_line) == "SystemExit: 4"


def test_code_larger_than_a_pipe_buffer_arrives_whole(pool: WorkerPool) -> None:
    blob = "x" * 1_000_000
    assert pool.run(f"s = {blob!r}\nprint(len(s))").stdout == "1000000\n"


def test_preloaded_modules_are_already_imported() -> None:
    code = "import sys; print('fractions' in sys.modules)"
    preloaded = WorkerPool(SandboxLimits(preload=("fractions",)), size=1)
    try:
        assert preloaded.run(code).stdout == "True\n"
    finally:
        preloaded.close()


def test_a_pool_that_cannot_start_workers_fails_fast() -> None:
    """Each call gets the failed start attempt's own error (or, once the pool saw its zygote die, that
    recorded failure) instead of waiting out the 20 s start timeout for a worker that cannot come (that
    wait would raise "no sandbox worker became ready in time")."""
    broken = WorkerPool(size=1, python="/bin/false", start_timeout_s=20)
    errors = []
    try:
        for _ in range(3):
            with pytest.raises(SandboxError) as caught:
                broken.run("print(1)")
            errors.append(caught.value)
    finally:
        broken.close()
    assert len(errors) == 3 and not [error for error in errors if "in time" in str(error)]
