"""The HTTP tool: name and schema from config, JSON POST, timeouts and HTTP errors as observations."""

from __future__ import annotations

import asyncio
import json

from trainers.net import ALLOW_ENV, EGRESS_ERROR
from trainers.tools.http import HttpTool

WEATHER_SCHEMA = {
    "type": "object",
    "properties": {"city": {"type": "string"}},
    "required": ["city"],
    "additionalProperties": False,
}


async def _call(tool: HttpTool, arguments: dict):
    try:
        return await tool.invoke(arguments)
    finally:
        await tool.close()


def test_spec_comes_from_config(endpoint: str) -> None:
    tool = HttpTool(url=endpoint, name="get_weather", description="Weather now.", parameters=WEATHER_SCHEMA)
    assert tool.spec() == {
        "type": "function",
        "function": {"name": "get_weather", "description": "Weather now.", "parameters": WEATHER_SCHEMA},
    }
    assert HttpTool.spec()["function"]["name"] == "http"  # the class default still works for catalogs


def test_arguments_are_posted_as_json(endpoint: str) -> None:
    tool = HttpTool(
        url=f"{endpoint}/weather", headers={"Authorization": "Bearer t"}, parameters=WEATHER_SCHEMA
    )
    result = asyncio.run(_call(tool, {"city": "Oslo"}))
    assert result.ok
    assert json.loads(result.output) == {"path": "/weather", "echo": {"city": "Oslo"}, "auth": "Bearer t"}


def test_config_schema_validates_arguments(endpoint: str) -> None:
    tool = HttpTool(url=endpoint, name="get_weather", parameters=WEATHER_SCHEMA)
    result = asyncio.run(_call(tool, {"town": "Oslo"}))
    assert not result.ok
    assert result.name == "get_weather"
    assert result.error.startswith("invalid arguments for get_weather:")


def test_slow_endpoint_times_out(endpoint: str) -> None:
    tool = HttpTool(url=endpoint, timeout_s=0.3)
    result = asyncio.run(_call(tool, {"sleep": 2}))
    # The endpoint answers 200 after its 2 s sleep, so an error naming the 0.3 s timeout (the client's or
    # the tool's own, whichever fires first) means the call gave up instead of waiting for the reply.
    assert not result.ok
    assert result.error.endswith("0.3s")


def test_http_error_status_is_an_error_observation(endpoint: str) -> None:
    result = asyncio.run(_call(HttpTool(url=f"{endpoint}/fail"), {}))
    assert not result.ok
    assert result.error.startswith("http: HTTP 500:")


def test_unreachable_endpoint_is_an_error_observation(monkeypatch) -> None:
    monkeypatch.setenv(ALLOW_ENV, "127.0.0.1:9")  # allowed, so the closed port itself is what fails
    result = asyncio.run(_call(HttpTool(url="http://127.0.0.1:9/tool", timeout_s=2), {}))
    assert not result.ok
    assert result.error == f"http: {EGRESS_ERROR}"  # no exception name: failures must read alike
