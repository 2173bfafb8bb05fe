"""One agent episode's record: the conversation as token ids, exactly as sampled, never retokenized.

A session holds segments. A request whose messages extend a segment's recorded messages continues it:
the recorded ids are reused for the prefix, only the new tool/user messages are tokenized (with the
template's own glue, loss mask 0), and the sampled ids are appended as they came from the backend
(loss mask 1, with their log-probs). A request that does not extend any segment (an edited history,
other tools) starts a new segment, and a second continuation of the same segment (a retry, `n` > 1)
forks a copy: each segment becomes its own trajectory, none is merged into another.
"""

from __future__ import annotations

import copy
from dataclasses import dataclass, field
from typing import Any

from trainers.agent.messages import MessageError, assistant_message
from trainers.backends.base import GenerationOutput
from trainers.config.limits import RolloutLimits
from trainers.rollout.in_process import row_ground_truth, row_question
from trainers.rollout.observations import truncate_middle
from trainers.templates.chatml import ChatMLToolTemplate
from trainers.trajectory import ToolResult, Trajectory, Turn


@dataclass
class Segment:
    """One line of the conversation: its canonical messages and the token ids they are made of."""

    messages: list[dict]
    tools: list[dict]
    context: list[int]
    turns: list[Turn]
    turn_closed: bool = False  # the last assistant turn sampled its own end-of-turn marker
    continued: bool = False  # a request continued its last assistant turn; a second one forks a copy

    def extended_by(self, messages: list[dict], tools: list[dict]) -> bool:
        n = len(self.messages)
        return tools == self.tools and len(messages) > n and messages[:n] == self.messages

    @property
    def assistant_turns(self) -> list[Turn]:
        return [t for t in self.turns if t.role == "assistant"]


@dataclass
class AgentSession:
    """An episode: its key, limits, segments, and how it ended (failure reason, posted reward, result)."""

    episode_id: str
    key: str
    template: ChatMLToolTemplate
    limits: RolloutLimits
    segments: list[Segment] = field(default_factory=list)
    requests: int = 0
    new_tokens: int = 0
    ended: bool = False
    failure: str | None = None  # why the episode failed; a failed episode earns reward 0
    posted_reward: float | None = None
    result: Any = None  # what the agent program's `run` returned

    # --- requests --------------------------------------------------------------------------------
    def check_context(self, segment: Segment, budget: int, max_context_tokens: int) -> None:
        """Fail the episode when this turn's context and new tokens would pass the context bound."""
        if len(segment.context) + budget > max_context_tokens:
            self.fail("context_limit")
            raise LimitExceeded("context_limit")

    def budget(self, max_tokens: int | None) -> int:
        """New tokens the next request may sample, or a failure when a limit is spent."""
        if self.requests >= self.limits.max_turns:
            self.fail("turn_limit")
        left = self.limits.max_total_new_tokens - self.new_tokens
        if left <= 0:
            self.fail("token_limit")
        if self.failure is not None:
            raise LimitExceeded(self.failure)
        cap = min(self.limits.max_new_tokens_per_turn, left)
        return cap if max_tokens is None else max(1, min(cap, max_tokens))

    def prepare(self, messages: list[dict], tools: list[dict]) -> Segment:
        """The segment this request samples from: a continued (or forked) one, or a new one."""
        base = max(
            (s for s in self.segments if s.extended_by(messages, tools)),
            key=lambda s: len(s.messages),
            default=None,
        )
        new = messages[len(base.messages) :] if base is not None else messages
        if base is None or any(m["role"] == "assistant" for m in new):
            return self._start(messages, tools)
        segment = self._fork(base) if base.continued else base
        base.continued = True
        self._append_followup(segment, new)
        segment.messages = list(messages)
        return segment

    def fork(self, segment: Segment) -> Segment:
        """A copy that samples its own continuation of the same context (the other choices of `n`)."""
        return self._fork(segment)

    def record(self, segment: Segment, out: GenerationOutput, text: str, *, with_calls: bool) -> dict:
        """Append the sampled ids as an assistant turn; return its canonical message."""
        template = self.template
        parsed = template.parse(text, tools=segment.tools)
        finish = out.finish_reason
        if finish == "stop" and out.stop_string and out.stop_string == template.turn_end:
            finish = "eos"
        segment.turns.append(
            Turn(
                "assistant", text, list(out.token_ids), [1] * len(out.token_ids), list(out.logprobs),
                tool_calls=parsed.tool_calls if with_calls else [], reasoning=parsed.reasoning,
                finish_reason=finish, entropies=None if out.entropies is None else list(out.entropies),
            )
        )  # fmt: skip
        segment.context.extend(out.token_ids)
        segment.turn_closed = finish == "eos"
        segment.continued = False  # a new tail: the next request continues it in place
        self.new_tokens += len(out.token_ids)
        message = assistant_message(parsed, text, template.turn_end, with_calls=with_calls)
        segment.messages.append(message)
        return message

    def fail(self, reason: str) -> None:
        """Record the first reason the episode failed (later ones follow from it)."""
        if self.failure is None:
            self.failure = reason

    # --- segments --------------------------------------------------------------------------------
    def _start(self, messages: list[dict], tools: list[dict]) -> Segment:
        if messages[-1]["role"] == "assistant":
            raise MessageError("the last message is the assistant's: nothing to answer")
        prompt = self.template.render_messages(messages, tools)
        ids = self.encode(prompt)
        segment = Segment(
            list(messages), list(tools), list(ids), [Turn("prompt", prompt, ids, [0] * len(ids))]
        )
        self.segments.append(segment)
        return segment

    def _fork(self, segment: Segment) -> Segment:
        twin = copy.deepcopy(segment)
        twin.continued = False
        self.segments.append(twin)
        return twin

    def _append_followup(self, segment: Segment, new: list[dict]) -> None:
        """The new messages' glue; a tool response is cut as built-in rollouts cut it (the session still
        records the message as sent, so the client's echo of it matches)."""
        cap = self.limits.max_tool_response_chars
        new = [
            {**m, "content": truncate_middle(m["content"].rstrip("\n"), cap)} if m["role"] == "tool" else m
            for m in new
        ]
        glue = self.template.render_followup(new, turn_closed=segment.turn_closed)
        ids = self.encode(glue)
        tools_only = all(m["role"] == "tool" for m in new)
        segment.turns.append(Turn("tool" if tools_only else "glue", glue, ids, [0] * len(ids)))
        segment.context.extend(ids)
        answered = [m for m in new if m["role"] == "tool"]
        last = segment.assistant_turns[-1] if segment.assistant_turns else None
        if last is not None and answered:  # as in built-in rollouts: results sit on the calling turn
            last.tool_results.extend(ToolResult(m["name"], True, m["content"]) for m in answered)

    def encode(self, text: str) -> list[int]:
        return list(self.template.tokenizer.encode(text, add_special_tokens=False))

    # --- the record ------------------------------------------------------------------------------
    def trajectories(self, group_id: str, sample_index: int, row: dict) -> list[Trajectory]:
        """Each segment with sampled tokens as a trajectory (the first keeps the episode's uid); an
        episode with none gives one trajectory of its task's prompt alone, so its failure still counts."""
        sampled = [s for s in self.segments if s.assistant_turns]
        if not sampled:
            question = row_question(row)
            prompt = self.template.render_messages([{"role": "user", "content": question}], [])
            ids = self.encode(prompt)
            sampled = [Segment([], [], ids, [Turn("prompt", prompt, ids, [0] * len(ids))])]
        return [self._trajectory(s, j, group_id, sample_index, row) for j, s in enumerate(sampled)]

    def _trajectory(self, segment: Segment, j: int, group_id: str, k: int, row: dict) -> Trajectory:
        last = segment.assistant_turns[-1] if segment.assistant_turns else None
        answer = None
        if isinstance(self.result, dict) and self.result.get("answer") is not None:
            answer = str(self.result["answer"])
        elif last is not None:
            answer = self.template.parse(last.text).final_answer
        return Trajectory(
            uid=f"{group_id}/{k}" if j == 0 else f"{group_id}/{k}~{j}",
            group_id=group_id,
            sample_index=k,
            turns=segment.turns,
            final_answer=answer,
            finish_reason=self.failure or (last.finish_reason if last is not None else "") or "",
            ground_truth=row_ground_truth(row),
            metadata={
                **dict(row.get("metadata") or {}),
                "question": row_question(row),
                "failure": self.failure,
                "posted_reward": self.posted_reward,
                "agent": {
                    "episode": self.episode_id,
                    "segment": j,
                    "requests": self.requests,
                    "result": self.result,
                },
            },
        )


class LimitExceeded(RuntimeError):
    """The session spent its turn or token budget; the episode ends with this reason."""
