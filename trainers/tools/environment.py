"""Environment tools: each instance owns one environment; an action is a tool call (RAGEN)."""

from __future__ import annotations

from typing import Any, ClassVar

from trainers.envs.base import Environment
from trainers.tools.base import Tool, ToolOutput


class EnvironmentTool(Tool):
    """The tool's observation is the new state as a text grid, then the step's reward."""

    env_class: ClassVar[type[Environment]]
    default_timeout_s = 5.0

    def __init__(self, *, timeout_s: float | None = None, **env_config: Any) -> None:
        super().__init__(timeout_s=timeout_s)
        self.environment = self.env_class(**env_config)

    @classmethod
    def action_parameters(cls, actions: tuple[str, ...]) -> dict[str, Any]:
        return {
            "type": "object",
            "properties": {"action": {"type": "string", "enum": list(actions)}},
            "required": ["action"],
            "additionalProperties": False,
        }

    def reset(self, initial_state: dict[str, Any] | None = None, seed: int | None = None) -> str:
        return self.environment.reset(initial_state, seed)

    async def run(self, arguments: dict[str, Any]) -> ToolOutput:
        env = self.environment
        if env.done:
            return ToolOutput(False, "", "the episode is over; give your final answer")
        observation, reward, done = env.step(arguments["action"])
        return ToolOutput(True, f"{observation}\nreward: {reward:g}, done: {str(done).lower()}")
