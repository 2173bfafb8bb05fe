"""The rollout engine: multi-turn tool-integrated trajectories, token-in/token-out, overlapped with tools.

Generation stops at the template's stop strings: the end of the message for the ChatML templates
(one message may make several calls, each in its own `<tool_call>` block), the end of a code block
for ToRL, a tool's closing tag for ARTIST. The turn's calls run concurrently, their responses (one
per call, in call order) are tokenized and appended with loss mask 0, and generation resumes from
the exact ids sampled so far, until a final answer, end-of-sequence, the turn limit, the token
budget or a finished environment.
"""

from __future__ import annotations

import asyncio
import zlib
from concurrent.futures import Executor
from dataclasses import dataclass, field

from trainers.backends.base import GenerationBackend, GenerationRequest
from trainers.config.limits import TOOL_LIMIT_NOTICE, RolloutLimits
from trainers.config.sampling import SamplingParams
from trainers.envs.base import Environment
from trainers.parsing.tool_calls import called_name
from trainers.rollout.in_process import InProcessRollouts, row_ground_truth, row_question
from trainers.rollout.observations import observation
from trainers.rollout.scheduler import GenerationScheduler
from trainers.templates import ChatTemplate
from trainers.templates.base import tool_name
from trainers.tools.toolset import ToolBinding, Toolset
from trainers.trajectory import ToolCall, ToolResult, Trajectory, Turn


@dataclass
class _Progress:
    """Where one trajectory stands: its full token context and what it has spent."""

    context: list[int]
    new_tokens: int = 0
    calls_used: int = 0
    finish: str = "max_turns"
    specs: list[dict] = field(default_factory=list)
    seed: str | None = None  # with the turn number, seeds this trajectory's sampling
    turns: int = 0


class RolloutEngine(InProcessRollouts):
    """Turns dataset rows into trajectories with one backend, one template and a set of tool bindings;
    the in-process `Rollouts`."""

    def __init__(
        self,
        backend: GenerationBackend,
        template: ChatTemplate | str,
        tool_bindings: list[ToolBinding | dict | str],
        limits: RolloutLimits | None = None,
        sampling: SamplingParams | None = None,
        *,
        prompt_source: str | None = None,
        max_concurrent: int = 512,
    ) -> None:
        super().__init__(backend, limits, sampling)
        self.template = self.bind_template(template)
        self.tool_bindings = list(tool_bindings)
        self.prompt_source = prompt_source
        self.max_concurrent = max_concurrent  # live trajectories at once; bounds memory on big datasets

    async def arun(
        self,
        rows: list[dict],
        samples_per_prompt: int = 1,
        *,
        seed: int | None = None,
        executor: Executor | None = None,
    ) -> list[Trajectory]:
        """All samples of all rows as concurrent tasks; results ordered by row, then sample index.

        Generation batches run in `executor` (default: asyncio's thread pool).
        """
        self.backend.begin_rollout()  # weights may have changed since the last rollout
        gate = asyncio.Semaphore(self.max_concurrent)
        async with GenerationScheduler(self.backend, executor=executor) as scheduler:
            tasks = [
                self._trajectory(row, index, k, scheduler, seed, gate)
                for index, row in enumerate(rows)
                for k in range(samples_per_prompt)
            ]
            trajectories = await asyncio.gather(*tasks)
        self.last_stats = scheduler.stats
        return list(trajectories)

    async def _trajectory(
        self,
        row: dict,
        index: int,
        k: int,
        scheduler: GenerationScheduler,
        seed: int | None,
        gate: asyncio.Semaphore,
    ) -> Trajectory:
        group_id = str(row.get("id", index))
        # every sample of a row starts from the same environment state (a RAGEN/GiGPO group)
        env_seed = zlib.crc32(f"{seed}:{group_id}".encode())
        async with gate:
            toolset = Toolset.build(self.tool_bindings, initial_state=row.get("initial_state"), seed=env_seed)
            scheduler.joined()
            try:
                await toolset.start()
                base = seed if seed is not None else self.sampling.seed
                sample_seed = None if base is None else f"{base}:{group_id}:{k}"
                return await self._rollout(row, group_id, k, toolset, scheduler, sample_seed)
            finally:
                scheduler.left()
                await toolset.close()

    async def _rollout(
        self,
        row: dict,
        group_id: str,
        k: int,
        toolset: Toolset,
        scheduler: GenerationScheduler,
        sample_seed: str | None,
    ) -> Trajectory:
        env = toolset.environment
        specs = with_listed_tools(toolset.specs(), row)
        question = row_question(row)
        prompt = self.template.render_prompt(
            question=question,
            tools=specs,
            observation=env.observation() if env is not None else None,
            source=self.prompt_source,
            tokenizer=self.tokenizer,
        )
        traj = Trajectory(
            uid=f"{group_id}/{k}",
            group_id=group_id,
            sample_index=k,
            ground_truth=row_ground_truth(row),
            metadata={"question": question, **(row.get("metadata") or {})},  # what a judge reward reads
        )
        prompt_ids = self.encode(prompt)
        traj.turns.append(Turn("prompt", prompt, prompt_ids, [0] * len(prompt_ids)))
        progress = _Progress(context=list(prompt_ids), specs=specs, seed=sample_seed)
        for _ in range(self.limits.max_turns):
            if not await self._step(traj, progress, toolset, scheduler):
                break
        traj.finish_reason = progress.finish
        return traj

    async def _step(
        self, traj: Trajectory, progress: _Progress, toolset: Toolset, scheduler: GenerationScheduler
    ) -> bool:
        """One assistant turn and its tool responses; False when the trajectory is over."""
        limits = self.limits
        budget = min(limits.max_new_tokens_per_turn, limits.max_total_new_tokens - progress.new_tokens)
        if budget <= 0:
            progress.finish = "token_budget"
            return False
        env = toolset.environment
        state_hash = env.state_hash() if env is not None else None
        sampling = self._sampling(progress)  # counts this turn
        request = GenerationRequest(
            list(progress.context), budget, self._stops(progress), sampling,
            may_continue=progress.turns < limits.max_turns,
        )  # fmt: skip
        out = await scheduler.generate(request)
        finish = out.finish_reason
        if finish == "stop" and out.stop_string and out.stop_string == self.template.turn_end:
            finish = "eos"  # the policy ended its message (its end-of-turn need not be the tokenizer's eos)
        text = self.tokenizer.decode(out.token_ids, skip_special_tokens=False)
        parsed = self.template.parse(text, tools=progress.specs)
        turn = Turn(
            "assistant",
            text,
            list(out.token_ids),
            [1] * len(out.token_ids),
            list(out.logprobs),
            tool_calls=parsed.tool_calls,
            reasoning=parsed.reasoning,
            state_hash=state_hash,
            finish_reason=finish,
            entropies=None if out.entropies is None else list(out.entropies),
        )
        traj.turns.append(turn)
        progress.context.extend(out.token_ids)
        progress.new_tokens += len(out.token_ids)
        if parsed.final_answer is not None:
            traj.final_answer = parsed.final_answer
        if not parsed.tool_calls:
            self._penalise_no_action(turn, env)
            return self._ended_without_calls(progress, finish, parsed.final_answer is not None)
        closed = finish == "eos"
        steps_before = len(env.rewards) if env is not None else 0
        glue, role = await self._answer_calls(turn, parsed.tool_calls, toolset, progress, closed)
        if glue is None:  # ToRL past the limit, nothing executed: as if the turn had no calls
            return self._ended_without_calls(progress, finish, parsed.final_answer is not None)
        glue_ids = self.encode(glue)
        traj.turns.append(Turn(role, glue, glue_ids, [0] * len(glue_ids)))
        progress.context.extend(glue_ids)
        if env is not None:  # the reward of every action this turn took (RAGEN: several per turn)
            taken = env.rewards[steps_before:]
            turn.state = env.observation()
            turn.env_reward = float(sum(taken)) if taken else env.invalid_action_penalty
            if env.done:
                progress.finish = "env_done"
                return False
        return True

    @staticmethod
    def _penalise_no_action(turn: Turn, env: Environment | None) -> None:
        """An environment turn without a call took no action: it earns the environment's penalty."""
        if env is not None and env.invalid_action_penalty:
            turn.state, turn.env_reward = env.observation(), env.invalid_action_penalty

    def _ended_without_calls(self, progress: _Progress, finish_reason: str, answered: bool) -> bool:
        if answered:
            progress.finish = "answer"
            return False
        if finish_reason == "stop":  # a stop string outside any call: keep generating
            return True
        if finish_reason == "eos":
            progress.finish = "eos"
        elif progress.new_tokens >= self.limits.max_total_new_tokens:
            progress.finish = "token_budget"
        else:
            progress.finish = "length"
        return False

    async def _answer_calls(
        self, turn: Turn, calls: list[ToolCall], toolset: Toolset, progress: _Progress, closed: bool
    ) -> tuple[str | None, str]:
        """Run the calls within the budget C; return the glue text (None: nothing to append) and its role.

        C counts executed calls: in call order, each call that can run (well formed, a known tool) takes
        one unit; once none is left, the turn's remaining calls are not executed and get the limit
        result. Malformed calls before that point get their own error response and take nothing. The
        calls that run, run concurrently; results and responses keep the call order.
        """
        left = self.limits.max_tool_calls - progress.calls_used
        n_run = 0
        for call in calls:
            if left <= 0:
                break
            n_run += 1
            left -= toolset.runnable(call)
        run_now, over = calls[:n_run], calls[n_run:]
        progress.calls_used += sum(map(toolset.runnable, run_now))
        results = [observation(r, self.limits) for r in await toolset.call_many(run_now)] if run_now else []
        notice = self.limits.on_tool_limit == "notice"
        skipped = [limit_result(call, notice) for call in over]
        turn.tool_results = results + skipped
        if notice and over and not results:
            return self.template.render_notice(TOOL_LIMIT_NOTICE, turn_closed=closed), "glue"
        shown = results + (skipped if notice else [])
        if not shown:
            return None, "glue"
        return self.template.render_tool_responses(shown, turn_closed=closed), "tool"

    def _sampling(self, progress: _Progress) -> SamplingParams:
        """Each turn of each sample its own seed, so results do not depend on how batches formed."""
        progress.turns += 1
        if progress.seed is None:
            return self.sampling
        return self.sampling.model_copy(
            update={"seed": zlib.crc32(f"{progress.seed}:{progress.turns}".encode())}
        )

    def _stops(self, progress: _Progress) -> list[str]:
        """ToRL past its limit drops the call stops so the model writes on in plain text; the end of
        the message (the ChatML templates' only stop) still ends the turn."""
        stops = self.template.stops(progress.specs)
        spent = progress.calls_used >= self.limits.max_tool_calls
        if spent and self.limits.on_tool_limit == "continue_text":
            return [s for s in stops if s == self.template.turn_end]
        return stops

    def encode(self, text: str) -> list[int]:
        """Tokenize template text and tool output (never policy-sampled text) without special additions."""
        return list(self.tokenizer.encode(text, add_special_tokens=False))


def with_listed_tools(specs: list[dict], row: dict) -> list[dict]:
    """The bound tools' specs, then the candidate tools a row lists in `tools` (Tool-N1's per-sample
    lists; the workbench keeps that column in `metadata`): shown in the prompt, not executable."""
    listed = row.get("tools") or (row.get("metadata") or {}).get("tools") or []
    bound = {tool_name(spec) for spec in specs}
    return specs + [spec for spec in listed if isinstance(spec, dict) and tool_name(spec) not in bound]


def limit_result(call: ToolCall, notice: bool) -> ToolResult:
    """A call past the budget C: not executed; under ZeroTIR's behaviour the model is shown the notice."""
    output = TOOL_LIMIT_NOTICE if notice else ""
    return ToolResult(called_name(call), False, output, "tool call limit reached", 0.0, executed=False)
