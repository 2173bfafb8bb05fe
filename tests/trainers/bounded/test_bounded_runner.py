"""The bounded runner: one reused worker process, and each bound ends a call without hanging the caller."""

from __future__ import annotations

import os
import threading

import pytest

from trainers.bounded import BoundedCallError, BoundedRunner, BoundsExceeded, Limits

pytestmark = pytest.mark.timeout(300)  # a bound that failed would hang, not fail


@pytest.fixture
def runner():
    runner = BoundedRunner(Limits(cpu_s=600, wall_s=600, memory_mb=512, output_bytes=10_000), workers=1)
    yield runner
    runner.close()


def test_calls_share_one_worker_process(runner):
    first = runner.call("os:getpid")
    assert first != os.getpid()
    assert [runner.call("os:getpid") for _ in range(5)] == [first] * 5
    assert runner.call("operator:add", 2, 3) == 5


@pytest.mark.slow
def test_cpu_limit_ends_a_big_integer_power_and_the_worker_is_replaced(runner):
    before = runner.call("os:getpid")
    runner.limits = Limits(cpu_s=1, wall_s=600, memory_mb=512)
    with pytest.raises(BoundsExceeded, match="exceeded 1 s of CPU time") as caught:
        runner.call("builtins:pow", 9, 9**9)  # 9^387420489 in C: no signal handler runs before it ends
    assert caught.value.kind == "time"
    after = runner.call("os:getpid")
    assert after != before and runner.call("operator:add", 1, 1) == 2


def test_deadline_kills_a_worker_that_uses_no_cpu(runner):
    runner.limits = Limits(cpu_s=600, wall_s=0.5, memory_mb=512)
    with pytest.raises(BoundsExceeded, match="exceeded the 0.5 s deadline") as caught:
        runner.call("time:sleep", 3600)
    assert caught.value.kind == "time"
    assert runner.call("operator:add", 1, 1) == 2


def test_memory_limit(runner):
    with pytest.raises(BoundsExceeded, match="exceeded 512 MiB of memory") as caught:
        runner.call("builtins:bytearray", 2**31)
    assert caught.value.kind == "memory"
    assert runner.call("operator:add", 1, 1) == 2


def test_output_cap_refuses_a_large_result_and_keeps_the_worker(runner):
    pid = runner.call("os:getpid")
    with pytest.raises(BoundsExceeded, match="exceeded 10000") as caught:
        runner.call("operator:mul", "x", 10**6)
    assert caught.value.kind == "output"
    assert runner.call("os:getpid") == pid


def test_an_exception_in_the_function_is_reported_and_the_worker_kept(runner):
    pid = runner.call("os:getpid")
    with pytest.raises(BoundedCallError, match="ZeroDivisionError: division by zero") as caught:
        runner.call("operator:truediv", 1, 0)
    assert caught.value.type_name == "ZeroDivisionError"
    assert runner.call("os:getpid") == pid


def test_a_worker_that_dies_is_reported_and_replaced(runner):
    with pytest.raises(BoundsExceeded, match=r"worker died \(exit status 3\)") as caught:
        runner.call("os:_exit", 3)
    assert caught.value.kind == "crash"
    assert runner.call("operator:add", 1, 1) == 2


def test_lone_surrogates_and_newlines_cross_intact(runner):
    assert runner.call("operator:add", "a\n\udc80", "\u2028b") == "a\n\udc80\u2028b"


def test_close_ends_a_call_in_flight_and_other_threads_keep_running(runner):
    runner.call("os:getpid")  # a started worker: close() kills processes, not one still starting
    outcome: dict[str, BaseException] = {}

    def hostile() -> None:
        try:
            runner.call("builtins:pow", 9, 9**9)
        except BoundsExceeded as exc:
            outcome["error"] = exc

    thread = threading.Thread(target=hostile)
    thread.start()
    while runner.in_flight == 0:
        thread.join(0.01)
    assert sum(range(10**5)) == 4999950000  # this thread runs Python while the worker computes
    assert runner.in_flight == 1 and thread.is_alive()
    runner.close()
    thread.join()
    assert outcome["error"].kind == "crash" and "SIGKILL" in str(outcome["error"])


def test_busy_workers_make_a_caller_wait_at_most_the_deadline(runner):
    runner.call("os:getpid")
    outcome: dict[str, BaseException] = {}

    def hold() -> None:
        try:
            runner.call("time:sleep", 3600)
        except BoundsExceeded as exc:
            outcome["error"] = exc

    thread = threading.Thread(target=hold)
    thread.start()
    while runner.in_flight == 0:
        thread.join(0.01)
    runner.limits = Limits(cpu_s=600, wall_s=0.2, memory_mb=512)
    with pytest.raises(BoundsExceeded, match="every worker stayed busy for 0.2 s"):
        runner.call("operator:add", 1, 1)
    runner.close()
    thread.join()
    assert outcome["error"].kind == "crash"


def test_a_forked_process_starts_its_own_worker(runner):
    parent_worker = runner.call("os:getpid")
    read, write = os.pipe()
    pid = os.fork()
    if pid == 0:  # the child: the parent's pipes are forgotten, a call starts a fresh worker
        try:
            os.write(write, str(runner.call("os:getpid")).encode())
        finally:
            os._exit(0)
    os.close(write)
    child_worker = int(os.read(read, 64))
    os.waitpid(pid, 0)
    os.close(read)
    assert child_worker not in (parent_worker, pid)
    assert runner.call("os:getpid") == parent_worker
