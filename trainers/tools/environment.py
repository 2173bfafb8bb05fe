"""Environment tools: each instance owns one environment; an action is a tool call (RAGEN).

A turn may take several actions, as in RAGEN (`<answer>Left || Up</answer>`): several calls in one
message, or several actions in one call, `{"action": "left || up"}` or `{"actions": ["left", "up"]}`.
They are taken in order, at most `max_actions_per_turn` in one turn (RAGEN's cap, default 5, counted
over all the turn's calls); the rest are not taken, and the observation says so.
"""

from __future__ import annotations

from typing import Any, ClassVar

from trainers.envs.base import Environment
from trainers.tools.base import Tool, ToolOutput
from trainers.trajectory import ToolResult

ACTION_SEPARATOR = "||"  # RAGEN's separator between the actions of one turn
MAX_ACTIONS_PER_TURN = 5  # RAGEN's default max_actions_per_turn
DESCRIBE_NOTE = "Under the grid, a line in words: what lies in each direction and where the goal is from you."


class EnvironmentTool(Tool):
    """The tool's observation is the new state as a text grid, then the reward of the call's actions."""

    env_class: ClassVar[type[Environment]]
    default_timeout_s = 5.0

    def __init__(
        self,
        *,
        timeout_s: float | None = None,
        max_actions_per_turn: int = MAX_ACTIONS_PER_TURN,
        **env_config: Any,
    ) -> None:
        super().__init__(timeout_s=timeout_s)
        self.environment = self.env_class(**env_config)
        self.count_turns(max_actions_per_turn)
        if self.environment.describe:  # the spec says what the extra line is
            self.description = f"{self.description} {DESCRIBE_NOTE}"
        if max_actions_per_turn != MAX_ACTIONS_PER_TURN:  # the spec shows this instance's cap
            self.parameters = self.action_parameters(tuple(self.env_class.actions), max_actions_per_turn)

    def count_turns(self, max_actions_per_turn: int) -> None:
        """Take at most `max_actions_per_turn` actions a turn (see `begin_turn`)."""
        if max_actions_per_turn < 1:
            raise ValueError("max_actions_per_turn must be at least 1")
        self.max_actions_per_turn = max_actions_per_turn
        self.turn_actions: int | None = None  # actions taken this turn; None outside a turn (direct calls)

    @classmethod
    def action_parameters(
        cls, actions: tuple[str, ...], max_per_turn: int = MAX_ACTIONS_PER_TURN
    ) -> dict[str, Any]:
        """One action in `action`, or several, taken in order, in `actions`."""
        return {
            "type": "object",
            "properties": {
                "action": {"type": "string", "enum": list(actions)},
                "actions": {
                    "type": "array",
                    "items": {"type": "string", "enum": list(actions)},
                    "minItems": 1,
                    "description": f"several actions, taken in order; at most {max_per_turn} per turn",
                },
            },
            "oneOf": [{"required": ["action"]}, {"required": ["actions"]}],
            "additionalProperties": False,
        }

    def reset(self, initial_state: dict[str, Any] | None = None, seed: int | None = None) -> str:
        return self.environment.reset(initial_state, seed)

    def begin_turn(self) -> None:
        """Start counting this turn's actions against `max_actions_per_turn` (the toolset calls it)."""
        self.turn_actions = 0

    async def invoke(self, arguments: Any) -> ToolResult:
        return await super().invoke(normalise_actions(arguments))

    async def run(self, arguments: dict[str, Any]) -> ToolOutput:
        env = self.environment
        if env.done:
            return ToolOutput(False, "", "the episode is over; give your final answer")
        actions = list(arguments["actions"]) if "actions" in arguments else [arguments["action"]]
        cap = self.max_actions_per_turn
        room = cap - (self.turn_actions or 0)
        if room <= 0:
            return ToolOutput(False, "", f"at most {cap} actions per turn; no action of this call was taken")
        taken, reward = 0, 0.0
        for action in actions[:room]:
            if env.done:
                break
            reward += await self.take(action)
            taken += 1
        if self.turn_actions is not None:
            self.turn_actions += taken
        lines = [env.observation(), f"reward: {reward:g}, done: {str(env.done).lower()}"]
        if len(actions) > 1:
            lines.append(f"actions taken: {', '.join(actions[:taken])}")
        rest = actions[taken:]
        if rest:
            why = "the episode is over" if env.done else f"at most {cap} actions per turn"
            lines.append(f"not taken ({why}): {', '.join(rest)}")
        return ToolOutput(True, "\n".join(lines))

    async def take(self, action: str) -> float:
        """One action in the environment; its reward."""
        return self.environment.step(action)[1]


def normalise_actions(arguments: Any) -> Any:
    """RAGEN's action text: `"Left || Up"` becomes `actions: ["left", "up"]`; names are lower-cased."""
    if not isinstance(arguments, dict):
        return arguments
    out = dict(arguments)
    action = out.get("action")
    if isinstance(action, str):
        parts = [p.strip().lower() for p in action.split(ACTION_SEPARATOR)]
        if len(parts) > 1 and "actions" not in out:
            del out["action"]
            out["actions"] = parts
        else:
            out["action"] = parts[0] if len(parts) == 1 else action
    actions = out.get("actions")
    if isinstance(actions, list):
        out["actions"] = [a.strip().lower() if isinstance(a, str) else a for a in actions]
    return out
