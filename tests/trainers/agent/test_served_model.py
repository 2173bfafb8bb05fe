"""`python -m trainers serve MODEL_DIR`: the tiny model on the project's own OpenAI-compatible endpoint,
answered through the real `openai` client, refused without its key, and used as a real judge."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import openai
import pytest

from tests.trainers.rewards.conftest import build_trajectory
from trainers.metrics import keys
from trainers.metrics.step_metrics import judge_metrics
from trainers.net import ALLOW_ENV
from trainers.rewards import RewardContext
from trainers.rewards.judge import Judge
from trainers.rewards.judge_endpoints import JUDGES_ENV

REPO = Path(__file__).resolve().parents[3]
KEY = "served-model-test-key"


@pytest.fixture(scope="module")
def served(tiny_model_dir: Path) -> Iterator[str]:
    """The base URL of the served tiny model (key in SERVED_KEY)."""
    command = [sys.executable, "-m", "trainers", "serve", str(tiny_model_dir), "--port", "0",
               "--api-key-env", "SERVED_KEY", "--max-new-tokens", "24", "--threads", "1"]  # fmt: skip
    env = {**os.environ, "SERVED_KEY": KEY}
    process = subprocess.Popen(
        command, cwd=REPO, env=env, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True
    )
    try:
        line = process.stdout.readline()
        assert line.startswith("serving "), line
        yield line.rsplit(" ", 1)[1].strip()
    finally:
        process.kill()
        process.wait(10)


def test_the_openai_client_gets_a_completion(served):
    client = openai.OpenAI(base_url=served, api_key=KEY, max_retries=0)
    reply = client.chat.completions.create(
        model="local", messages=[{"role": "user", "content": "2+2?"}], max_tokens=8
    )
    assert reply.choices[0].message.role == "assistant"
    assert 1 <= reply.usage.completion_tokens <= 8 and reply.usage.prompt_tokens > 0
    assert [m.id for m in client.models.list().data] == ["local"]


def test_the_openai_client_streams_the_same_completion(served):
    client = openai.OpenAI(base_url=served, api_key=KEY, max_retries=0)
    messages = [{"role": "user", "content": "2+2?"}]
    chunks = list(client.chat.completions.create(model="local", messages=messages, max_tokens=8, stream=True))
    assert chunks[0].choices[0].delta.role == "assistant"
    assert chunks[-1].choices[0].finish_reason in ("stop", "length", "tool_calls")


def test_a_request_without_the_key_is_refused(served):
    client = openai.OpenAI(base_url=served, api_key="wrong", max_retries=0)
    with pytest.raises(openai.AuthenticationError):
        client.chat.completions.create(model="local", messages=[{"role": "user", "content": "hi"}])


def test_the_served_model_is_a_real_judge(served, monkeypatch):
    """The tiny model does not answer in the strict format: every score is the defined error score, each
    counted, with the judge's tokens; nothing raises."""
    monkeypatch.setenv(
        JUDGES_ENV, json.dumps({"tiny": {"url": served, "model": "local", "api_key_env": "JUDGE_KEY"}})
    )
    monkeypatch.setenv("JUDGE_KEY", KEY)
    monkeypatch.setenv(ALLOW_ENV, served.split("/")[2])
    judge = Judge(judge="tiny", rubric="Grade: {{ response }}", error_score=0.25, max_tokens=16)
    trajectories = [build_trajectory(text) for text in ("The answer is 4.", "It is 5.")]
    assert judge.score_batch([trajectories], RewardContext()) == [[0.25, 0.25]]
    metrics = judge_metrics(trajectories)
    assert metrics[keys.JUDGE_CALLS] == 2 and metrics[keys.JUDGE_ERRORS] == 2
    assert metrics[keys.JUDGE_TOKENS] > 0
