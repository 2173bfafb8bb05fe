"""Per-run rollout limits (ToRL and ZeroTIR call budgets, turn and token budgets)."""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, ConfigDict, Field

TOOL_LIMIT_NOTICE = "Tool call limit reached. You can no longer call the tool."


class RolloutLimits(BaseModel):
    """What bounds one trajectory; unknown keys are errors."""

    model_config = ConfigDict(extra="forbid")

    max_tool_calls: int = Field(4, ge=0, description="C: tool calls executed per trajectory")
    on_tool_limit: Literal["continue_text", "notice"] = Field(
        "notice",
        description="continue_text: ToRL, further calls are not executed; notice: ZeroTIR, inject the notice",
    )
    max_turns: int = Field(4, ge=1, description="assistant turns per trajectory")
    max_new_tokens_per_turn: int = Field(128, ge=1)
    max_total_new_tokens: int = Field(512, ge=1, description="policy tokens per trajectory")
    max_tool_response_chars: int = Field(1024, ge=16, description="longer responses are middle-truncated")
    tool_error_style: Literal["last_line", "full"] = Field(
        "last_line", description="last_line: ToRL, only the traceback's last line"
    )
