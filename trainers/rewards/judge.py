"""LLM-judge reward: a registered judge model grades each trajectory (pointwise) or ranks a group's
trajectories together (groupwise, RULER-style), from a Jinja rubric, in strict answer formats.

A request that gets no usable answer (timeout, HTTP error, unreachable, refusal, format not followed)
scores `error_score` and leaves a note. Each call is recorded in the trajectory's metadata under
`keys.JUDGE_METADATA` (the step metrics count calls, errors, tokens, time and cache hits from there).
Identical requests are asked once per component instance (a bounded in-memory cache).
"""

from __future__ import annotations

import hashlib
import json
from collections import OrderedDict
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, field_validator, model_validator
from pydantic_core import PydanticCustomError

from trainers.metrics.keys import JUDGE_METADATA
from trainers.rewards import judge_formats as formats
from trainers.rewards.base import REWARDS, RewardComponent, RewardContext, add_note, assistant_text
from trainers.rewards.correctness import predicted_answer
from trainers.rewards.judge_client import JudgeReply, ask_all
from trainers.rewards.judge_endpoints import JUDGES_ENV, JudgeEndpointError, judge_endpoint
from trainers.templates.jinja import TemplateRenderError, render_template_source
from trainers.trajectory import Trajectory

Mode = Literal["pointwise", "groupwise"]
CACHE_SIZE = 4096  # replies kept per component instance
REPLY_CHARS = 2000  # the tail of each reply kept in the trajectory's metadata
URL_FIELDS = ("url", "base_url", "api_base", "endpoint", "api_key")

POINTWISE_RUBRIC = """Question:
{{ question }}

Reference answer (may be empty):
{{ ground_truth }}

Response to grade:
{{ response }}

Grade how well the response answers the question: a correct, complete, clearly reasoned answer is 10;
a wrong answer or none is 0."""

GROUPWISE_RUBRIC = """Question:
{{ question }}

Reference answer (may be empty):
{{ ground_truth }}
{% for c in candidates %}
Candidate {{ c.number }}:
{{ c.response }}
{% endfor %}
Rank the candidates by how well each answers the question: correctness first, then clarity and brevity."""


def _refused(message: str) -> PydanticCustomError:
    """A validation error whose message is `message` as is (no "Value error, " before it)."""
    return PydanticCustomError("judge_config", "{message}", {"message": message})


class JudgeParams(BaseModel):
    model_config = ConfigDict(extra="forbid")

    judge: str = Field(
        ..., description=f"name of a judge the operator registered in {JUDGES_ENV} (never a URL)"
    )
    rubric: str | None = Field(
        None,
        description="Jinja prompt: question, answer, response, ground_truth, tool_calls (groupwise: "
        "candidates); default: a generic correctness rubric for the mode",
    )
    mode: Mode = Field(
        "pointwise", description="pointwise: SCORE 0-10 per response; groupwise: RANKING of a group"
    )
    error_score: float = Field(0.0, description="reward when the judge gives no usable answer")
    temperature: float = Field(0.0, ge=0.0, le=2.0, description="the judge's sampling temperature")
    max_tokens: int = Field(512, ge=1, le=32768, description="the judge's answer length limit")

    @model_validator(mode="before")
    @classmethod
    def _no_endpoint_fields(cls, data: Any) -> Any:
        for field in URL_FIELDS:
            if isinstance(data, dict) and field in data:
                raise _refused(f"{field}: a run config names a judge registered in {JUDGES_ENV}, never a URL")
        return data

    @field_validator("judge")
    @classmethod
    def _registered(cls, name: str) -> str:
        if "://" in name or name.lower().startswith(("http:", "https:")):
            raise _refused(f"a run config names a judge registered in {JUDGES_ENV}, never a URL")
        try:
            judge_endpoint(name)
        except JudgeEndpointError as exc:
            raise _refused(str(exc)) from None
        return name

    @model_validator(mode="after")
    def _rubric_renders(self) -> JudgeParams:
        try:
            render_template_source(self.rubric_source, _variables(self.mode, _EMPTY, [_EMPTY]))
        except TemplateRenderError as exc:
            raise _refused(f"rubric: {exc}") from None
        return self

    @property
    def rubric_source(self) -> str:
        if self.rubric is not None:
            return self.rubric
        return POINTWISE_RUBRIC if self.mode == "pointwise" else GROUPWISE_RUBRIC


@dataclass(frozen=True)
class _View:
    """What a rubric sees of one trajectory."""

    question: str
    answer: str
    response: str
    ground_truth: str
    tool_calls: list[dict[str, Any]]


_EMPTY = _View("", "", "", "", [])


def _view(trajectory: Trajectory) -> _View:
    question = trajectory.metadata.get("question", trajectory.ground_truth.get("question"))
    gold = trajectory.ground_truth.get("answer")
    calls = [{"name": c.name, "arguments": c.arguments} for c in trajectory.tool_calls]
    return _View(
        question="" if question is None else str(question),
        answer=predicted_answer(trajectory) or "",
        response=assistant_text(trajectory),
        ground_truth="" if gold is None else str(gold),
        tool_calls=calls,
    )


def _variables(mode: Mode, first: _View, group: list[_View]) -> dict[str, Any]:
    variables = {
        "question": first.question,
        "answer": first.answer,
        "response": first.response,
        "ground_truth": first.ground_truth,
        "tool_calls": first.tool_calls,
    }
    if mode == "groupwise":
        variables["candidates"] = [
            {"number": i, "answer": v.answer, "response": v.response, "tool_calls": v.tool_calls}
            for i, v in enumerate(group, start=1)
        ]
    return variables


@dataclass
class _Job:
    """One judge request: the trajectories it scores, its body, and (once asked) the reply."""

    members: list[Trajectory]
    body: dict[str, Any] | None
    reply: JudgeReply
    cached: bool = False


@REWARDS.register("judge")
class Judge(RewardComponent):
    """An LLM judge scores the response (pointwise, 0-10 scaled to 0-1) or ranks the group (groupwise)."""

    name = "judge"
    Params = JudgeParams

    def __init__(self, **params: Any) -> None:
        super().__init__(**params)
        self._cache: OrderedDict[str, JudgeReply] = OrderedDict()

    def score(self, trajectory: Trajectory, ctx: RewardContext) -> float:
        return self.score_batch([[trajectory]], ctx)[0][0]

    def score_group(self, trajectories: Sequence[Trajectory], ctx: RewardContext) -> list[float]:
        return self.score_batch([trajectories], ctx)[0]

    def score_batch(self, groups: Sequence[Sequence[Trajectory]], ctx: RewardContext) -> list[list[float]]:
        """Every request of the batch at once; pointwise one per trajectory, groupwise one per group."""
        del ctx
        if self.params.mode == "pointwise":
            jobs = [self._job([t]) for group in groups for t in group]
        else:
            jobs = [self._job(list(group)) for group in groups if group]
        self._ask(jobs)
        rewards: dict[int, float] = {}
        for job in jobs:
            for trajectory, reward in zip(job.members, self._rewards(job), strict=True):
                rewards[id(trajectory)] = reward
        return [[rewards[id(t)] for t in group] for group in groups]

    def _job(self, members: list[Trajectory]) -> _Job:
        views = [_view(t) for t in members]
        try:
            prompt = render_template_source(
                self.params.rubric_source, _variables(self.params.mode, views[0], views)
            )
        except TemplateRenderError as exc:
            return _Job(members, None, JudgeReply(error=f"rubric: {exc}"))
        instruction = (
            formats.pointwise_instruction()
            if self.params.mode == "pointwise"
            else formats.groupwise_instruction(len(members))
        )
        body = {
            "messages": [{"role": "system", "content": instruction}, {"role": "user", "content": prompt}],
            "temperature": self.params.temperature,
            "max_tokens": self.params.max_tokens,
        }
        return _Job(members, body, JudgeReply())

    def _ask(self, jobs: list[_Job]) -> None:
        """Fill each job's reply: from the cache, else from one request per distinct body."""
        bodies: dict[str, dict[str, Any]] = {}
        waiting: dict[str, list[_Job]] = {}
        for job in jobs:
            if job.body is None:  # the rubric failed to render: the job already holds its error
                continue
            key = self._key(job.body)
            if key in self._cache:
                self._cache.move_to_end(key)
                job.reply, job.cached = self._cache[key], True
            else:
                bodies.setdefault(key, job.body)
                waiting.setdefault(key, []).append(job)
        if not bodies:
            return
        replies = ask_all(judge_endpoint(self.params.judge), list(bodies.values()))
        for key, reply in zip(bodies, replies, strict=True):
            for index, job in enumerate(waiting[key]):
                job.reply, job.cached = reply, index > 0
            if reply.text is not None:  # transport failures are not kept: a later step asks again
                self._remember(key, reply)

    def _key(self, body: dict[str, Any]) -> str:
        canonical = json.dumps([self.params.judge, body], sort_keys=True, ensure_ascii=False)
        return hashlib.sha256(canonical.encode()).hexdigest()

    def _remember(self, key: str, reply: JudgeReply) -> None:
        self._cache[key] = reply
        if len(self._cache) > CACHE_SIZE:
            self._cache.popitem(last=False)

    def _rewards(self, job: _Job) -> list[float]:
        """The members' rewards from the reply; on any failure `error_score` each, noted and recorded."""
        error, rewards = job.reply.error, None
        if error is None:
            try:
                rewards = self._parse(job.reply.text or "", len(job.members))
            except formats.FormatError as exc:
                error = f"malformed answer: {exc}"
        if rewards is None:
            rewards = [self.params.error_score] * len(job.members)
        self._record(job, rewards, error)
        return rewards

    def _parse(self, text: str, n: int) -> list[float]:
        if self.params.mode == "pointwise":
            return [formats.parse_score(text) / formats.MAX_SCORE]
        return formats.ranking_rewards(formats.parse_ranking(text, n), n)

    def _record(self, job: _Job, rewards: list[float], error: str | None) -> None:
        """A record per member; the call's cost (tokens, time, cache hit) only on the first, so the
        step metrics count each call once."""
        reply = job.reply
        for index, (trajectory, reward) in enumerate(zip(job.members, rewards, strict=True)):
            record: dict[str, Any] = {"judge": self.params.judge, "mode": self.params.mode, "reward": reward}
            if self.params.mode == "groupwise":
                record["candidate"] = index + 1
            record["error"] = error
            record["reply"] = (reply.text or "")[-REPLY_CHARS:]
            if index == 0:
                cost = (0, 0.0) if job.cached else (reply.tokens, reply.seconds)
                record.update(tokens=cost[0], seconds=cost[1], cached=job.cached)
            trajectory.metadata.setdefault(JUDGE_METADATA, []).append(record)
            if error is not None:
                add_note(
                    trajectory, f"judge {self.params.judge}: {error}; scored {self.params.error_score:g}"
                )
