"""A team's own tool behind an HTTP endpoint: arguments are POSTed as JSON; the body is the observation.

Requests go through the egress guard (trainers/net): internal addresses only when the operator allowlists
them, no redirects, and one error text for every failure to reach the endpoint.
"""

from __future__ import annotations

import json
import ssl
from functools import cache
from typing import Any

from trainers.net.policy import EGRESS_ERROR
from trainers.tools.base import TOOLS, Tool, ToolOutput


@TOOLS.register("http")
class HttpTool(Tool):
    """Name, description and argument schema come from config, so one class serves any endpoint."""

    name = "http"
    description = "Call a remote tool over HTTP."
    parameters: dict[str, Any] = {"type": "object"}

    def __init__(
        self,
        *,
        url: str,
        name: str = "http",
        description: str = "Call a remote tool over HTTP.",
        parameters: dict[str, Any] | None = None,
        headers: dict[str, str] | None = None,
        timeout_s: float | None = None,
        max_chars: int = 4096,
    ) -> None:
        super().__init__(timeout_s=timeout_s)
        self.url, self.headers, self.max_chars = url, headers or {}, max_chars
        self.name, self.description = name, description
        self.parameters = parameters or {"type": "object"}
        self._client: Any = None

    async def run(self, arguments: dict[str, Any]) -> ToolOutput:
        import httpx

        from trainers.net.guard import guarded_client

        if self._client is None:
            # Resolving and connecting get half the call's time, so a host that never answers the
            # connection fails with the same error as a refused one, before the call's own timeout names
            # a timeout; waiting for the reply is bounded by that call timeout alone.
            timeout = httpx.Timeout(self.timeout_s, connect=self.timeout_s / 2, read=None)
            self._client = guarded_client(timeout=timeout, headers=self.headers, verify=ssl_context())
        try:
            response = await self._client.post(self.url, json=arguments)
        except httpx.HTTPError:  # refused, unresolvable, unreachable, broken: the same words for all
            return ToolOutput(False, "", f"{self.name}: {EGRESS_ERROR}")
        body = _body_text(response)[: self.max_chars]
        if response.is_success:
            return ToolOutput(True, body)
        return ToolOutput(False, "", f"{self.name}: HTTP {response.status_code}: {body[:500]}")

    async def close(self) -> None:
        if self._client is not None:
            await self._client.aclose()
            self._client = None


@cache
def ssl_context() -> ssl.SSLContext:
    """Loading the CA bundle takes tens of milliseconds; do it once, not once per trajectory."""
    import certifi

    return ssl.create_default_context(cafile=certifi.where())


def _body_text(response: Any) -> str:
    """JSON bodies are re-serialised compactly; anything else is passed through as text."""
    try:
        return json.dumps(response.json(), ensure_ascii=False)
    except ValueError:
        return response.text
