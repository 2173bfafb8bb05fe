"""A local model on an OpenAI-compatible endpoint (`python -m trainers serve MODEL_DIR`): each request is
a one-turn session of its own, so the endpoint that serves a run's policy to agent programs also serves
any model directory as a judge (register its URL in WORKBENCH_JUDGES) or to try an agent against.
"""

from __future__ import annotations

import asyncio
import secrets

from starlette.requests import Request

from trainers.agent.endpoint import AgentEndpoint, EndpointError
from trainers.agent.session import AgentSession
from trainers.backends.base import GenerationBackend, GenerationOutput, GenerationRequest
from trainers.config.limits import RolloutLimits
from trainers.config.sampling import SamplingParams
from trainers.rollout.scheduler import GenerationScheduler
from trainers.templates.chatml import ChatMLToolTemplate


class ServedEndpoint(AgentEndpoint):
    """Stateless: a request with the API key (or any request when there is none) gets a fresh session
    for its one completion; there are no episodes to post rewards or results to."""

    def __init__(
        self,
        backend: GenerationBackend,
        template: ChatMLToolTemplate,
        *,
        max_new_tokens: int,
        api_key: str | None,
        model_name: str,
    ) -> None:
        limits = RolloutLimits(max_turns=1, max_new_tokens_per_turn=max_new_tokens,
                               max_total_new_tokens=max_new_tokens)  # fmt: skip
        super().__init__(template, limits, SamplingParams(), self._generate, model_name=model_name)
        self.backend, self.api_key = backend, api_key
        self._scheduler: GenerationScheduler | None = None
        self._lock = asyncio.Lock()

    async def _generate(self, request: GenerationRequest) -> GenerationOutput:
        async with self._lock:  # one scheduler for the server's loop, started by the first request
            if self._scheduler is None:
                self._scheduler = await GenerationScheduler(self.backend).__aenter__()
                self._scheduler.joined()  # an open server: batch whatever arrives within the settle time
        return await self._scheduler.generate(request)

    def _session(self, request: Request) -> AgentSession:
        if request.path_params.get("episode") is not None:
            raise EndpointError(404, "a served model has no episodes", "not_found_error")
        scheme, _, key = request.headers.get("authorization", "").partition(" ")
        if self.api_key is not None and not (
            scheme.lower() == "bearer" and secrets.compare_digest(key.strip(), self.api_key)
        ):
            raise EndpointError(401, "a valid API key is required", "authentication_error", "invalid_api_key")
        return AgentSession(f"request-{secrets.token_hex(6)}", "", self.template, self.limits)
