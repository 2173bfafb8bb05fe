"""The endpoint's API as a client meets it: keys open only their own episode and only until it ends,
malformed requests get OpenAI-shaped errors and change nothing, limits answer with their reason."""

from __future__ import annotations

import asyncio
import json

import httpx
import pytest

from tests.trainers.agent.conftest import NonCanonicalBackend, calls_then_answer
from trainers.agent.endpoint import AgentEndpoint
from trainers.config.limits import RolloutLimits
from trainers.config.sampling import SamplingParams
from trainers.templates import TEMPLATES

USER = [{"role": "user", "content": "What is 2+2?"}]


@pytest.fixture
def endpoint(tiny_tokenizer):
    backend = NonCanonicalBackend(tiny_tokenizer, calls_then_answer(0))

    async def generate(request):
        return backend.generate([request])[0]

    template = TEMPLATES.get("qwen_tool")(tokenizer=tiny_tokenizer)
    limits = RolloutLimits(max_turns=2, max_new_tokens_per_turn=64, max_total_new_tokens=512)
    return AgentEndpoint(template, limits, SamplingParams(), generate)


def call(endpoint: AgentEndpoint, method: str, path: str, key: str | None, **kwargs) -> httpx.Response:
    async def go() -> httpx.Response:
        transport = httpx.ASGITransport(app=endpoint.app())
        headers = {"Authorization": f"Bearer {key}"} if key else {}
        async with httpx.AsyncClient(transport=transport, base_url="http://agent") as client:
            return await client.request(method, path, headers=headers, **kwargs)

    return asyncio.run(go())


def test_a_completion_answers_in_the_openai_shape(endpoint):
    session = endpoint.open("e1", seed="0")
    response = call(endpoint, "POST", "/v1/chat/completions", session.key, json={"messages": USER})
    body = response.json()
    assert response.status_code == 200, body
    assert body["object"] == "chat.completion" and body["choices"][0]["message"]["role"] == "assistant"
    assert body["choices"][0]["finish_reason"] == "stop"
    assert body["usage"]["completion_tokens"] == len(session.segments[0].turns[-1].token_ids)


def test_keys_open_only_their_episode_and_only_until_it_ends(endpoint):
    mine, other = endpoint.open("e1", seed=None), endpoint.open("e2", seed=None)
    assert call(endpoint, "POST", "/v1/chat/completions", "guess", json={"messages": USER}).status_code == 401
    assert call(endpoint, "POST", "/v1/chat/completions", None, json={"messages": USER}).status_code == 401
    stolen = call(endpoint, "POST", "/v1/episodes/e2/reward", mine.key, json={"reward": 1.0})
    assert stolen.status_code == 404 and other.posted_reward is None
    mine.ended = True
    late = call(endpoint, "POST", "/v1/chat/completions", mine.key, json={"messages": USER})
    assert late.status_code == 403 and late.json()["error"]["code"] == "episode_ended"
    assert mine.requests == 0


@pytest.mark.parametrize(
    ("body", "message"),
    [
        ({"messages": []}, "non-empty list"),
        ({"messages": [{"role": "wizard", "content": "x"}]}, "needs a role"),
        ({"messages": USER, "n": 99}, "n must be"),
        ({"messages": USER, "tools": [{"type": "function"}]}, "function.name"),
        ({"messages": USER, "stop": ["a", "b", "c", "d", "e"]}, "stop must be"),
    ],
)
def test_malformed_requests_get_a_clear_error_and_record_nothing(endpoint, body, message):
    session = endpoint.open("e1", seed=None)
    response = call(endpoint, "POST", "/v1/chat/completions", session.key, json=body)
    assert response.status_code == 400 and message in response.json()["error"]["message"]
    assert session.segments == []


def test_a_body_that_is_not_json_is_refused(endpoint):
    session = endpoint.open("e1", seed=None)
    response = call(endpoint, "POST", "/v1/chat/completions", session.key, content=b"{not json")
    assert response.status_code == 400 and "not JSON" in response.json()["error"]["message"]


def test_the_turn_limit_answers_with_its_reason_and_fails_the_episode(endpoint):
    session = endpoint.open("e1", seed=None)
    for _ in range(2):
        assert (
            call(endpoint, "POST", "/v1/chat/completions", session.key, json={"messages": USER}).status_code
            == 200
        )
    over = call(endpoint, "POST", "/v1/chat/completions", session.key, json={"messages": USER})
    assert over.status_code == 400 and over.json()["error"]["code"] == "turn_limit"
    assert session.failure == "turn_limit"


def test_a_reward_must_be_a_number(endpoint):
    session = endpoint.open("e1", seed=None)
    bad = call(endpoint, "POST", "/v1/episodes/e1/reward", session.key, json={"reward": "high"})
    assert bad.status_code == 400 and session.posted_reward is None
    good = call(endpoint, "POST", "/v1/episodes/e1/reward", session.key, json={"reward": 0.25})
    assert good.status_code == 200 and session.posted_reward == 0.25


def test_a_streamed_completion_carries_the_same_message_and_calls(tiny_tokenizer):
    backend = NonCanonicalBackend(tiny_tokenizer, calls_then_answer(1))

    async def generate(request):
        return backend.generate([request])[0]

    template = TEMPLATES.get("qwen_tool")(tokenizer=tiny_tokenizer)
    endpoint = AgentEndpoint(template, RolloutLimits(), SamplingParams(), generate)
    session = endpoint.open("e1", seed=None)
    body = {"messages": USER, "stream": True, "stream_options": {"include_usage": True}}
    response = call(endpoint, "POST", "/v1/chat/completions", session.key, json=body)
    assert response.headers["content-type"].startswith("text/event-stream")
    events = [line[len("data: ") :] for line in response.text.splitlines() if line.startswith("data: ")]
    assert events[-1] == "[DONE]"
    chunks = [json.loads(e) for e in events[:-1]]
    delta = chunks[0]["choices"][0]["delta"]
    assert delta["tool_calls"][0]["function"]["name"] == "calculator" and delta["tool_calls"][0]["index"] == 0
    assert chunks[1]["choices"][0]["finish_reason"] == "tool_calls"
    assert chunks[2]["usage"]["completion_tokens"] == len(session.segments[0].turns[-1].token_ids)


def test_a_conversation_past_the_context_bound_fails_the_episode(tiny_tokenizer):
    backend = NonCanonicalBackend(tiny_tokenizer, calls_then_answer(0))

    async def generate(request):
        return backend.generate([request])[0]

    template = TEMPLATES.get("qwen_tool")(tokenizer=tiny_tokenizer)
    endpoint = AgentEndpoint(template, RolloutLimits(), SamplingParams(), generate, max_context_tokens=256)
    session = endpoint.open("e1", seed=None)
    long = [{"role": "user", "content": "word " * 400}]
    response = call(endpoint, "POST", "/v1/chat/completions", session.key, json={"messages": long})
    assert response.status_code == 400 and response.json()["error"]["code"] == "context_limit"
    assert session.failure == "context_limit" and backend.requests == []


def test_a_long_tool_response_is_cut_as_built_in_rollouts_cut_it(tiny_tokenizer):
    backend = NonCanonicalBackend(tiny_tokenizer, calls_then_answer(1))

    async def generate(request):
        return backend.generate([request])[0]

    template = TEMPLATES.get("qwen_tool")(tokenizer=tiny_tokenizer)
    limits = RolloutLimits(max_tool_response_chars=256)
    endpoint = AgentEndpoint(template, limits, SamplingParams(), generate)
    session = endpoint.open("e1", seed=None)
    reply = call(endpoint, "POST", "/v1/chat/completions", session.key, json={"messages": USER}).json()
    message = reply["choices"][0]["message"]
    tool = {"role": "tool", "tool_call_id": message["tool_calls"][0]["id"], "content": "x" * 5000}
    response = call(
        endpoint, "POST", "/v1/chat/completions", session.key, json={"messages": [*USER, message, tool]}
    )
    assert response.status_code == 200 and len(session.segments) == 1  # the echo matched: one segment
    [glue] = [t for t in session.segments[0].turns if t.role == "tool"]
    assert "characters truncated" in glue.text and glue.text.count("x") < 256
