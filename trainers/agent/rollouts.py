"""`AgentRollouts`: the `Rollouts` whose episodes an agent program plays against the policy's endpoint.

Per `run`, the endpoint serves on a Unix socket from the rollout's event loop and every (row, sample)
gets a session and a sandboxed run of the program. Generation goes through the same scheduler as the
built-in engine (batched across sessions, in the thread that trains), so the endpoint never blocks
the training loop and the training loop never waits on an agent's own code except through the step's
end. An episode whose program crashed, timed out, never called the endpoint or spent its turn/token
budget ends with that reason in `metadata["failure"]` (its reward is 0) and the run goes on.
"""

from __future__ import annotations

import asyncio
import math
import secrets
from collections import Counter
from concurrent.futures import Executor, ThreadPoolExecutor
from dataclasses import dataclass

from trainers.agent.endpoint import AgentEndpoint
from trainers.agent.program import AgentProgram
from trainers.agent.session import AgentSession
from trainers.agent.unix_server import endpoint_dir, serving
from trainers.backends.base import GenerationBackend
from trainers.config.agent import AgentConfig
from trainers.config.limits import RolloutLimits
from trainers.config.sampling import SamplingParams
from trainers.rollout.in_process import InProcessRollouts
from trainers.rollout.scheduler import GenerationScheduler
from trainers.sandbox.backends import shared_pool
from trainers.sandbox.limits import SandboxLimits, SandboxResult
from trainers.sandbox.pool import WorkerPool
from trainers.sandbox.worker import endpoint_path
from trainers.templates.chatml import ChatMLToolTemplate
from trainers.trajectory import Trajectory

# what the runner and the OpenAI client's chat completions import (some lazily): imported once in the
# sandbox pool's zygote, so an episode's process starts with them
RUNNER_MODULES = (
    "httpx",
    "httpcore",
    "openai",
    "openai.resources.chat.chat",
    "openai.resources.chat.completions.completions",
)
WARM_WORKERS = 64
SANDBOX_FAILURES = {"timeout": "timeout", "error": "crash", "killed": "crash"}
LOG_CHARS = 20_000  # of each of stdout and stderr, kept with the episode for the inspector


@dataclass
class _Live:
    """What the episodes of one `run` share: the endpoint, the scheduler, the sandbox pool, the socket
    as the sandbox sees it, the concurrency gate and the threads that wait on the sandbox."""

    endpoint: AgentEndpoint
    scheduler: GenerationScheduler
    pool: WorkerPool
    socket: str
    gate: asyncio.Semaphore
    threads: ThreadPoolExecutor


class AgentRollouts(InProcessRollouts):
    """Rows to trajectories through an agent program; the agent `Rollouts`."""

    def __init__(
        self,
        backend: GenerationBackend,
        template: ChatMLToolTemplate | str,
        program: AgentProgram,
        config: AgentConfig,
        limits: RolloutLimits | None = None,
        sampling: SamplingParams | None = None,
    ) -> None:
        super().__init__(backend, limits, sampling)
        template = self.bind_template(template)
        if not isinstance(template, ChatMLToolTemplate):
            raise ValueError("the agent endpoint renders conversations with a ChatML template")
        self.template, self.program, self.config = template, program, config
        self.sandbox_limits = SandboxLimits(
            wall_s=config.wall_s, cpu_s=math.ceil(config.wall_s), memory_mb=config.memory_mb,
            endpoint_dir=endpoint_dir(), preload=RUNNER_MODULES,
        )  # fmt: skip

    # --- one rollout -----------------------------------------------------------------------------
    async def arun(
        self, rows: list[dict], samples_per_prompt: int = 1, *, seed: int | None = None,
        executor: Executor | None = None,
    ) -> list[Trajectory]:  # fmt: skip
        """Every (row, sample) as an episode of the program; trajectories ordered by row, then sample."""
        self.backend.begin_rollout()
        pool = shared_pool(self.sandbox_limits, min(self.config.concurrency, WARM_WORKERS))
        socket = f"{endpoint_dir()}/{secrets.token_hex(6)}.sock"
        inner = (
            f"{endpoint_path({'endpoint_dir': endpoint_dir(), 'mode': pool.mode})}/{socket.rsplit('/', 1)[1]}"
        )
        threads = ThreadPoolExecutor(self.config.concurrency, thread_name_prefix="agent-episode")
        try:
            async with GenerationScheduler(self.backend, executor=executor) as scheduler:
                endpoint = AgentEndpoint(
                    self.template, self.limits, self.sampling, scheduler.generate,
                    max_context_tokens=self.config.max_context_tokens,
                )  # fmt: skip
                live = _Live(
                    endpoint, scheduler, pool, inner, asyncio.Semaphore(self.config.concurrency), threads
                )
                async with serving(endpoint.app(), socket):
                    episodes = [
                        self._episode(row, index, k, seed, live)
                        for index, row in enumerate(rows)
                        for k in range(samples_per_prompt)
                    ]
                    results = await asyncio.gather(*episodes)
        finally:
            threads.shutdown(wait=False, cancel_futures=True)
        self.last_stats = scheduler.stats
        self.last_metrics = episode_metrics([session for session, _ in results])
        return [traj for _, trajectories in results for traj in trajectories]

    async def _episode(
        self, row: dict, index: int, k: int, seed: int | None, live: _Live
    ) -> tuple[AgentSession, list[Trajectory]]:
        group_id = str(row.get("id", index))
        base = seed if seed is not None else self.sampling.seed
        sample_seed = None if base is None else f"{base}:{group_id}:{k}"
        session = live.endpoint.open(f"{group_id}-{k}-{secrets.token_hex(4)}", sample_seed)
        task = {key: value for key, value in row.items() if key not in ("answer", "tool_calls")}
        task["episode_id"] = session.episode_id  # for POST /v1/episodes/{id}/reward
        code = self.program.runner(
            task,
            socket=live.socket,
            key=session.key,
            episode=session.episode_id,
            timeout_s=self.config.wall_s,
        )
        async with live.gate:
            live.scheduler.joined()
            try:
                loop = asyncio.get_running_loop()
                outcome = await loop.run_in_executor(live.threads, live.pool.run, code)
            finally:
                live.scheduler.left()
                session.ended = True
        return session, self._trajectories(session, outcome, row, group_id, k)

    def _trajectories(
        self, session: AgentSession, outcome: SandboxResult, row: dict, group_id: str, k: int
    ) -> list[Trajectory]:
        if outcome.status in SANDBOX_FAILURES:
            session.fail(SANDBOX_FAILURES[outcome.status])
        if session.requests == 0:
            session.fail("no_calls")
        log = {
            "status": outcome.status,
            "error": outcome.error_line,
            "stdout": outcome.stdout[-LOG_CHARS:],
            "stderr": outcome.stderr[-LOG_CHARS:],
            "elapsed_s": round(outcome.elapsed_s, 3),
        }
        trajectories = session.trajectories(group_id, k, row)
        for traj in trajectories:
            traj.metadata["agent"]["log"] = log
        return trajectories


def episode_metrics(sessions: list[AgentSession]) -> dict[str, float]:
    """Episodes, failures by reason, requests and segments per episode, posted rewards."""
    n = max(1, len(sessions))
    failures = Counter(s.failure for s in sessions if s.failure is not None)
    metrics = {
        "agent/episodes": float(len(sessions)),
        "agent/failed": float(sum(failures.values())),
        "agent/requests_per_episode": sum(s.requests for s in sessions) / n,
        "agent/segments_per_episode": sum(len(s.segments) for s in sessions) / n,
        "agent/posted_rewards": float(sum(s.posted_reward is not None for s in sessions)),
    }
    metrics.update({f"agent/failures/{reason}": float(count) for reason, count in failures.items()})
    return metrics
