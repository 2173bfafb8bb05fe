"""What a normal snippet gets back: output, the REPL value, the last traceback line, timing."""

from __future__ import annotations

import time

import pytest

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


def test_warm_call_is_fast(pool: WorkerPool) -> None:
    pool.run("pass")  # let the pool refill behind this one
    time.sleep(0.5)
    assert pool.run("print(1)").elapsed_s < 0.5


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
    broken = WorkerPool(size=1, python="/bin/false", start_timeout_s=20)
    start = time.monotonic()
    try:
        for _ in range(3):
            with pytest.raises(SandboxError):
                broken.run("print(1)")
    finally:
        broken.close()
    assert time.monotonic() - start < 5
