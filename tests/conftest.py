"""Plugins for the whole suite: the budget of an unmarked test's call (tests/support/call_budget.py), and
pytester, with which that budget is tested."""

pytest_plugins = ["pytester", "tests.support.call_budget"]
