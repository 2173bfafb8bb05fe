"""Format reward: the template's tags are present and in order (DeepSeek-R1-style format reward).

Templates check a whole response (their grammars include tool responses), hence the default scope.
"""

from __future__ import annotations

from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field

from trainers.rewards.base import REWARDS, RewardComponent, RewardContext
from trainers.rewards.tags import tags_in_order
from trainers.trajectory import Trajectory


class FormatParams(BaseModel):
    model_config = ConfigDict(extra="forbid")

    template: str | None = Field(None, description="template whose format rule applies; default: the run's")
    tags: list[str] | None = Field(
        None, description="own rule instead of the template's: these tags present, in this order"
    )
    scope: Literal["response", "each_turn"] = Field(
        "response",
        description="response: the whole response, tool output included; each_turn: every assistant turn",
    )
    ok: float = Field(1.0, description="reward when the format is right")
    bad: float = Field(0.0, description="reward when it is not")


@REWARDS.register("format")
class Format(RewardComponent):
    """`ok` when the policy text follows the format rule, else `bad`."""

    name = "format"
    Params = FormatParams
    params: FormatParams

    def score(self, trajectory: Trajectory, ctx: RewardContext) -> float:
        return self.params.ok if self._passes(trajectory, ctx) else self.params.bad

    def _passes(self, trajectory: Trajectory, ctx: RewardContext) -> bool:
        texts = (
            [t.text for t in trajectory.assistant_turns]
            if self.params.scope == "each_turn"
            else [trajectory.response_text]
        )
        if not trajectory.assistant_turns:
            return False
        if self.params.tags is not None:
            return all(tags_in_order(text, self.params.tags) for text in texts)
        return all(self._template(ctx).format_ok(text) for text in texts)

    def _template(self, ctx: RewardContext) -> Any:  # a ChatTemplate, imported lazily
        from trainers.templates import TEMPLATES  # lazy: templates import tokenizers and Jinja

        name = self.params.template or ctx.template
        if name is None:
            raise ValueError("format reward needs a template: set params.template or the run's template")
        return TEMPLATES.get(name)()
