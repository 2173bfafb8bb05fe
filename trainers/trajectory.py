"""The trajectory record: what a rollout produced, token by token, and what training reads back.

Token-in/token-out: `Turn.token_ids` of an assistant turn are the ids the policy sampled, never
re-encoded from text; tool responses and template glue are separate turns with loss mask 0.
"""

from __future__ import annotations

import json
from dataclasses import asdict, dataclass, field
from typing import Any, Literal

Role = Literal["prompt", "assistant", "tool", "glue"]


@dataclass
class ToolCall:
    """One call parsed from an assistant turn; `parse_error` is set when the call was malformed."""

    name: str
    arguments: dict[str, Any]
    raw: str = ""
    parse_error: str | None = None


@dataclass
class ToolResult:
    """The outcome of one call; `output` is the observation text shown to the model."""

    name: str
    ok: bool
    output: str
    error: str | None = None
    latency_s: float = 0.0
    executed: bool = True
    server: str | None = None  # the MCP or environment server that served the call, if any
    server_error: bool = False  # the call failed at that server (down, slow, broken reply, isError)


@dataclass
class Turn:
    """A contiguous span of tokens with one role.

    prompt: the rendered prompt; assistant: policy-sampled tokens (mask 1, with logprobs and, where the
    backend reports them, `entropies`: each token's sampling-distribution entropy in nats);
    tool / glue: tool responses, limit notices and template text (mask 0).
    For environments, `state_hash` is the state an assistant turn acted from (GiGPO anchor state)
    and `state` / `env_reward` what the environment returned after it.
    """

    role: Role
    text: str
    token_ids: list[int]
    loss_mask: list[int]
    logprobs: list[float] | None = None
    tool_calls: list[ToolCall] = field(default_factory=list)
    tool_results: list[ToolResult] = field(default_factory=list)
    reasoning: str | None = None
    state: str | None = None
    state_hash: str | None = None
    env_reward: float | None = None
    advantage: float | None = None
    finish_reason: str | None = None
    entropies: list[float] | None = None


@dataclass
class Trajectory:
    """A whole multi-turn exchange for one sample of one prompt (`group_id` groups the samples)."""

    uid: str
    group_id: str
    sample_index: int = 0
    turns: list[Turn] = field(default_factory=list)
    final_answer: str | None = None
    finish_reason: str = ""
    ground_truth: dict[str, Any] = field(default_factory=dict)
    metadata: dict[str, Any] = field(default_factory=dict)
    rewards: dict[str, float] = field(default_factory=dict)
    reward: float = 0.0
    advantage: float | None = None

    # --- token views -------------------------------------------------------------------------
    @property
    def prompt_turn(self) -> Turn | None:
        return self.turns[0] if self.turns and self.turns[0].role == "prompt" else None

    @property
    def prompt_text(self) -> str:
        turn = self.prompt_turn
        return turn.text if turn else ""

    @property
    def prompt_token_ids(self) -> list[int]:
        turn = self.prompt_turn
        return list(turn.token_ids) if turn else []

    @property
    def response_turns(self) -> list[Turn]:
        return [t for t in self.turns if t.role != "prompt"]

    @property
    def token_ids(self) -> list[int]:
        return [tok for t in self.turns for tok in t.token_ids]

    @property
    def response_token_ids(self) -> list[int]:
        return [tok for t in self.response_turns for tok in t.token_ids]

    @property
    def response_loss_mask(self) -> list[int]:
        return [m for t in self.response_turns for m in t.loss_mask]

    @property
    def response_logprobs(self) -> list[float]:
        """Sampling logprobs aligned with `response_token_ids` (0.0 where not sampled)."""
        out: list[float] = []
        for t in self.response_turns:
            out.extend(t.logprobs if t.logprobs is not None else [0.0] * len(t.token_ids))
        return out

    @property
    def response_text(self) -> str:
        return "".join(t.text for t in self.response_turns)

    @property
    def assistant_turns(self) -> list[Turn]:
        return [t for t in self.turns if t.role == "assistant"]

    @property
    def num_policy_tokens(self) -> int:
        return sum(self.response_loss_mask)

    # --- tool views --------------------------------------------------------------------------
    @property
    def tool_calls(self) -> list[ToolCall]:
        return [c for t in self.turns for c in t.tool_calls]

    @property
    def tool_results(self) -> list[ToolResult]:
        return [r for t in self.turns for r in t.tool_results]

    @property
    def num_tool_calls(self) -> int:
        return len(self.tool_calls)

    @property
    def num_failed_calls(self) -> int:
        return sum(1 for r in self.tool_results if not r.ok)

    def tool_calls_by_name(self) -> dict[str, int]:
        counts: dict[str, int] = {}
        for call in self.tool_calls:
            counts[call.name] = counts.get(call.name, 0) + 1
        return counts

    # --- serialisation -----------------------------------------------------------------------
    def to_dict(self) -> dict[str, Any]:
        return asdict(self)

    def to_json(self) -> str:
        return json.dumps(self.to_dict(), ensure_ascii=False)

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> Trajectory:
        turns = []
        for raw in data.get("turns", []):
            raw = dict(raw)
            raw["tool_calls"] = [ToolCall(**c) for c in raw.get("tool_calls", [])]
            raw["tool_results"] = [ToolResult(**r) for r in raw.get("tool_results", [])]
            turns.append(Turn(**raw))
        fields = {k: v for k, v in data.items() if k != "turns"}
        return cls(turns=turns, **fields)

    @classmethod
    def from_json(cls, text: str) -> Trajectory:
        return cls.from_dict(json.loads(text))
