"""The `judge` reward against a real local OpenAI-compatible judge (tests/support/judge_server.py): the
rubric `{{ response }}` lets each trajectory script the judge's answer (echoed, or a failure)."""

import asyncio
import re
import threading

import pytest
from pydantic import ValidationError

from tests.support.judge_server import Answer, judge_server, user_prompt
from trainers.metrics import keys
from trainers.metrics.step_metrics import judge_metrics
from trainers.net import ALLOW_ENV
from trainers.rewards import RewardContext, RewardDefinition
from trainers.rewards.judge import Judge

ECHO = "{{ response }}"
RANKING_RUBRIC = "{% for c in candidates %}Candidate {{ c.number }}: {{ c.response }}\n{% endfor %}"
_meeting = threading.Barrier(4, timeout=5)


def rank_by_value(prompt: str) -> str:
    """A judge that ranks candidates by the number each response holds, higher first, equal ones tied."""
    values = {int(n): float(v) for n, v in re.findall(r"^Candidate (\d+): (\S+)$", prompt, re.MULTILINE)}
    tiers = [
        " = ".join(str(n) for n in sorted(values) if values[n] == value)
        for value in sorted(set(values.values()), reverse=True)
    ]
    return "Compared.\nRANKING: " + " > ".join(tiers)


def script(body):
    prompt = user_prompt(body)
    if prompt.startswith("SLEEP"):
        return Answer("SCORE: 5", sleep_s=1.5)
    if prompt.startswith("FAIL"):
        return Answer(status=500)
    if prompt.startswith("REFUSE"):
        return Answer(refusal="I cannot grade this.")
    if prompt.startswith("MEET"):  # answered only if all four requests are in the server at once
        try:
            _meeting.wait()
        except threading.BrokenBarrierError:
            return Answer(status=503)
        return "SCORE: 8"
    if prompt.startswith("Candidate"):
        return rank_by_value(prompt)
    return prompt


@pytest.fixture
def judge(monkeypatch):
    with judge_server(script) as server:
        server.register(monkeypatch, timeout_s=0.5)
        yield server


def component(**params) -> Judge:
    return Judge(**{"judge": "local", "rubric": ECHO, **params})


def scores(judge_component, *groups):
    return judge_component.score_batch([list(g) for g in groups], RewardContext())


def test_pointwise_scores_are_read_and_scaled_to_one(judge, make_traj):
    trajs = [make_traj(t) for t in ("Right.\nSCORE: 7", "SCORE: 10", "SCORE: 0", "SCORE: 2.5")]
    assert scores(component(temperature=0.3, max_tokens=64), trajs) == [[0.7, 1.0, 0.0, 0.25]]
    request = judge.requests[0]
    assert (request["model"], request["temperature"], request["max_tokens"]) == ("judge-model", 0.3, 64)
    assert (
        request["messages"][0]["role"] == "system"
        and "SCORE: <a number from 0 to 10>" in (request["messages"][0]["content"])
    )
    assert sorted(user_prompt(r) for r in judge.requests) == sorted(t.response_text for t in trajs)
    assert judge_metrics(trajs) == {
        keys.JUDGE_CALLS: 4.0,
        keys.JUDGE_ERRORS: 0.0,
        keys.JUDGE_CACHE_HITS: 0.0,
        keys.JUDGE_TOKENS: 4 * 14.0,
        keys.JUDGE_SECONDS: pytest.approx(sum(t.metadata["judge"][0]["seconds"] for t in trajs)),
    }
    assert trajs[0].metadata["judge"][0]["reply"] == "Right.\nSCORE: 7"


def test_the_rubric_sees_question_answer_ground_truth_and_tool_calls(judge, make_traj):
    from trainers.trajectory import ToolCall

    rubric = (
        "Q={{ question }} A={{ answer }} GT={{ ground_truth }} "
        "CALLS={{ tool_calls | map(attribute='name') | join(',') }}\nSCORE: 4"
    )
    traj = make_traj(
        "I computed it.", {"answer": "42"}, calls=[ToolCall("calculator", {})], final_answer="41"
    )
    traj.metadata["question"] = "What is 6*7?"
    assert scores(component(rubric=rubric), [traj]) == [[0.4]]
    assert user_prompt(judge.requests[0]) == "Q=What is 6*7? A=41 GT=42 CALLS=calculator\nSCORE: 4"


def test_groupwise_ranks_each_group_in_one_request_and_maps_ranks_exactly(judge, make_traj):
    first = [make_traj(v, group_id="a") for v in ("2", "1", "3", "2")]  # RANKING: 3 > 1 = 4 > 2
    second = [make_traj(v, group_id="b") for v in ("0", "9", "5")]  # RANKING: 2 > 3 > 1
    judged = component(mode="groupwise", rubric=RANKING_RUBRIC)
    assert scores(judged, first, second) == [[0.5, 0.0, 1.0, 0.5], [0.0, 1.0, 0.5]]
    assert len(judge.requests) == 2
    prompts = sorted(user_prompt(r) for r in judge.requests)
    assert prompts[0] == "Candidate 1: 0\nCandidate 2: 9\nCandidate 3: 5\n"
    system = next(r for r in judge.requests if "Candidate 4" in user_prompt(r))["messages"][0]["content"]
    assert "compare 4 candidate responses" in system and "RANKING:" in system
    assert [t.metadata["judge"][0]["candidate"] for t in first] == [1, 2, 3, 4]
    assert judge_metrics(first + second)[keys.JUDGE_CALLS] == 2.0  # one call per group, counted once


def test_the_default_groupwise_rubric_numbers_the_candidates(judge, make_traj):
    group = [make_traj(v) for v in ("alpha", "beta")]
    Judge(judge="local", mode="groupwise").score_group(group, RewardContext())
    prompt = user_prompt(judge.requests[0])
    assert "Candidate 1:\nalpha" in prompt and "Candidate 2:\nbeta" in prompt


@pytest.mark.parametrize(
    ("response", "error"),
    [
        ("I think it is fine.", "malformed answer: expected one SCORE: line, found 0"),
        ("SLEEP", "timed out after 0.5 s"),
        ("FAIL", "HTTP 500"),
        ("REFUSE", "refusal"),
    ],
)
def test_no_usable_answer_gives_the_error_score_and_counts(judge, make_traj, response, error):
    good, bad = make_traj("SCORE: 6"), make_traj(response)
    assert scores(component(error_score=-0.5), [good, bad]) == [[0.6, -0.5]]
    assert bad.metadata["judge"][0]["error"] == error
    assert bad.metadata["notes"] == [f"judge local: {error}; scored -0.5"]
    assert judge_metrics([good, bad])[keys.JUDGE_ERRORS] == 1.0


def test_a_groupwise_failure_scores_the_whole_group(judge, make_traj):
    group = [make_traj("FAIL"), make_traj("SCORE: 1")]
    assert scores(component(mode="groupwise", error_score=0.25), group) == [[0.25, 0.25]]
    assert judge_metrics(group)[keys.JUDGE_ERRORS] == 1.0


def test_identical_requests_are_asked_once_per_run(judge, make_traj):
    judged = component()
    twins = [make_traj("SCORE: 3"), make_traj("SCORE: 3")]
    assert scores(judged, twins) == [[0.3, 0.3]]
    later = make_traj("SCORE: 3")
    assert scores(judged, [later]) == [[0.3]]
    assert len(judge.requests) == 1
    metrics = judge_metrics([*twins, later])
    assert (metrics[keys.JUDGE_CALLS], metrics[keys.JUDGE_CACHE_HITS], metrics[keys.JUDGE_TOKENS]) == (
        3,
        2,
        14,
    )
    scores(component(), [make_traj("SCORE: 3")])  # another run's component has a cache of its own
    assert len(judge.requests) == 2


def test_failed_requests_are_not_cached(judge, make_traj):
    judged = component()
    scores(judged, [make_traj("FAIL")])
    scores(judged, [make_traj("FAIL")])
    assert len(judge.requests) == 2


def test_a_batch_is_judged_concurrently(judge, make_traj):
    trajs = [make_traj("MEET") for _ in range(4)]
    for i, traj in enumerate(trajs):
        traj.metadata["question"] = str(i)  # four distinct requests
    judged = component(rubric="{{ response }}\n{{ question }}")
    assert scores(judged, trajs) == [[0.8] * 4]


def test_requests_carry_the_operators_key(judge, make_traj, monkeypatch):
    judge.register(monkeypatch, api_key_env="JUDGE_KEY")
    monkeypatch.setenv("JUDGE_KEY", "s3cret")
    scores(component(), [make_traj("SCORE: 1")])
    assert judge.headers[0]["Authorization"] == "Bearer s3cret"
    monkeypatch.delenv("JUDGE_KEY")
    traj = make_traj("SCORE: 2")
    assert scores(component(), [traj]) == [[0.0]]
    assert traj.metadata["judge"][0]["error"] == "the key variable JUDGE_KEY is not set"


def test_requests_pass_the_egress_allowlist(judge, make_traj, monkeypatch):
    monkeypatch.setenv(ALLOW_ENV, "")
    traj = make_traj("SCORE: 9")
    assert scores(component(), [traj]) == [[0.0]]
    assert traj.metadata["judge"][0]["error"].startswith("unreachable: request failed")
    assert judge.requests == []


def test_scoring_from_inside_an_event_loop(judge, make_traj):
    async def score_in_loop():
        return component().score(make_traj("SCORE: 5"), RewardContext())

    assert asyncio.run(score_in_loop()) == 0.5


def definition(params):
    return RewardDefinition.model_validate({"components": [{"name": "judge", "params": params}]})


def test_a_url_in_the_run_config_is_refused(judge):
    with pytest.raises(ValidationError, match=r"params\.judge: a run config names a judge registered in "):
        definition({"judge": judge.url})
    with pytest.raises(ValidationError, match="params: url: a run config names a judge registered in "):
        definition({"judge": "local", "url": judge.url})


def test_an_unregistered_judge_is_refused_with_the_registered_names(judge):
    with pytest.raises(
        ValidationError, match=r"params\.judge: no judge named 'grader' is registered; registered: local"
    ):
        definition({"judge": "grader"})


def test_a_rubric_that_does_not_render_is_refused(judge):
    with pytest.raises(
        ValidationError, match="params: rubric: template error on line 1: 'nope' is undefined"
    ):
        definition({"judge": "local", "rubric": "{{ nope }}"})
    with pytest.raises(ValidationError, match="'candidates' is undefined"):
        definition({"judge": "local", "rubric": RANKING_RUBRIC})  # pointwise has no candidates


def test_a_rubric_that_fails_on_a_trajectory_scores_the_error_score_without_asking(judge, make_traj):
    traj = make_traj("SCORE: 9")
    judged = component(rubric="{% if response %}{{ 1 / 0 }}{% endif %}", error_score=-1.0)
    assert scores(judged, [traj]) == [[-1.0]]
    assert traj.metadata["judge"][0]["error"].startswith(
        "rubric: template error on line 1: ZeroDivisionError"
    )
    assert judge.requests == [] and judge_metrics([traj])[keys.JUDGE_ERRORS] == 1.0
