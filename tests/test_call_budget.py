"""The budget of an unmarked test (tests/support/call_budget.py), in a pytest run of its own: a test that
sleeps or computes past it fails, the same test marked slow, services or browser passes, and a failing
test keeps its own failure."""

from __future__ import annotations

import re

import pytest

from tests.support.call_budget import load_scale

# The inner session runs in this process: without Django's plugin, which the outer session has already
# set up (a second setup_test_environment raises), and without a cache to write.
INNER_ARGS = ("-p", "tests.support.call_budget", "-p", "no:django", "-p", "no:cacheprovider")
SUMMARY = re.compile(r"(PASSED|FAILED) test_inner.py::(\w+)")
BUDGET_S = 0.05
INNER = """
import time

import pytest


def sleep():
    time.sleep(OVER_S)


def compute():
    start = time.process_time()
    while time.process_time() - start < OVER_S:  # CPU seconds, however loaded the machine is
        pass


def test_sleeps():
    sleep()


def test_computes():
    compute()


def test_quick():
    pass


@pytest.mark.slow
def test_slow_sleeps():
    sleep()


@pytest.mark.services
def test_services_computes():
    compute()


@pytest.mark.browser
def test_browser_sleeps():
    sleep()


def test_fails_slowly():
    sleep()
    assert 1 == 2
"""


@pytest.fixture
def inner(pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch) -> pytest.Pytester:
    monkeypatch.delenv("WORKBENCH_TEST_BUDGET_S", raising=False)
    pytester.makeini(
        f"[pytest]\nunmarked_test_budget_s = {BUDGET_S}\nmarkers =\n    slow\n    services\n    browser\n"
    )
    over_s = 3 * BUDGET_S * load_scale()  # over however the load scales it (its 1-min average is slow)
    pytester.makepyfile(test_inner=f"OVER_S = {over_s}\n{INNER}")
    return pytester


def test_unmarked_tests_over_the_budget_fail_and_marked_ones_pass(inner: pytest.Pytester) -> None:
    result = inner.runpytest(*INNER_ARGS, "-rA")
    outcomes = {m[2]: m[1] for line in result.outlines if (m := SUMMARY.match(line))}
    assert outcomes == {
        "test_sleeps": "FAILED",
        "test_computes": "FAILED",
        "test_quick": "PASSED",
        "test_slow_sleeps": "PASSED",
        "test_services_computes": "PASSED",
        "test_browser_sleeps": "PASSED",
        "test_fails_slowly": "FAILED",
    }
    budget_failure = f"*over the {BUDGET_S:g} s of an unmarked test (x * for the load): mark it slow*"
    result.stdout.fnmatch_lines(["*_ test_sleeps _*", budget_failure, "*_ test_computes _*", budget_failure])
    result.stdout.fnmatch_lines(["*_ test_fails_slowly _*", "E*assert 1 == 2"])


def test_the_variable_overrides_the_ini_and_zero_turns_the_budget_off(
    inner: pytest.Pytester, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("WORKBENCH_TEST_BUDGET_S", "0")
    result = inner.runpytest(*INNER_ARGS)
    result.assert_outcomes(passed=6, failed=1)  # only the test's own assertion
