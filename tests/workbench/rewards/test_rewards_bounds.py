"""The reward "test on a sample" page stays bounded: hostile answers return a note, not a frozen worker."""

import threading

import pytest
from django.db import connection
from django.test import Client

from trainers.bounded import Limits
from trainers.rewards import correctness
from workbench.rewards import services

pytestmark = pytest.mark.timeout(300)  # before the bounds these requests never returned
HUGE_FACTORIAL = "(9^{9})!"  # 387420489!: the cost guard lets it through, the worker's bounds stop it


@pytest.fixture
def reward(team, member):
    components = [{"name": "correctness"}]
    return services.reward_definition_create(team=team, user=member, name="c", components=components).item


@pytest.fixture
def checker_limits(monkeypatch):
    """Sets the answer checker's limits for one test, with no verdicts cached from other tests."""
    correctness._symbolic_check.cache_clear()

    def use(limits: Limits) -> None:
        monkeypatch.setattr(correctness.CHECKER, "limits", limits)

    yield use
    correctness._symbolic_check.cache_clear()


def _test_page(client, reward, text: str, answer: str = "1") -> str:
    sample = {"text": text, "template": "qwen_tool", "answer": answer, "step": "0"}
    response = client.post(f"/rewards/{reward.pk}/v/1/test/", sample)
    assert response.status_code == 200
    return response.content.decode()


def test_a_power_tower_scores_zero_with_a_note(client_for, member, reward):
    body = _test_page(client_for(member), reward, "\\boxed{9^9^9^9}")
    assert "<code>correctness</code></td><td>0<" in body
    assert "answer check refused: the power 9^9^9^9 has more than 10000 digits" in body


@pytest.mark.slow
def test_a_check_past_its_cpu_limit_scores_zero_with_a_note(client_for, member, reward, checker_limits):
    checker_limits(Limits(cpu_s=1, wall_s=300, output_bytes=1024))
    client = client_for(member)
    body = _test_page(client, reward, f"\\boxed{{{HUGE_FACTORIAL}}}")
    assert "<code>correctness</code></td><td>0<" in body
    assert "answer check timed out: exceeded 1 s of CPU time" in body
    assert 'id="score-total">1<' in _test_page(client, reward, "\\boxed{2+2}", answer="4")  # a new worker


def test_ten_thousand_unclosed_boxes_are_scored(client_for, member, reward):
    body = _test_page(client_for(member), reward, "\\boxed{" * 10_000)
    assert "<code>correctness</code></td><td>0<" in body and "score-notes" not in body


def test_healthz_answers_while_a_hostile_check_runs(client_for, member, reward, checker_limits):
    checker_limits(Limits(cpu_s=3600, wall_s=3600, output_bytes=1024))  # runs until the probe ends it
    correctness.CHECKER.call("os:getpid")  # a started worker, so close() below reaches it
    seen: dict[str, object] = {}

    def probe() -> None:
        try:
            while correctness.CHECKER.in_flight == 0:
                threading.Event().wait(0.01)
            seen["healthz"] = Client().get("/healthz").status_code
            seen["check_still_running"] = correctness.CHECKER.in_flight == 1
        finally:
            correctness.CHECKER.close()  # ends the hostile check: the request below returns
            connection.close()

    thread = threading.Thread(target=probe)
    thread.start()
    body = _test_page(client_for(member), reward, f"\\boxed{{{HUGE_FACTORIAL}}}")
    thread.join()
    assert seen == {"healthz": 200, "check_still_running": True}
    assert "answer check failed: worker died (killed by SIGKILL)" in body
