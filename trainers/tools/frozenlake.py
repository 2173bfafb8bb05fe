"""The FrozenLake environment as a tool: {"action": "up"|"down"|"left"|"right"}."""

from trainers.envs.base import MOVES
from trainers.envs.frozenlake import FrozenLake
from trainers.tools.base import TOOLS
from trainers.tools.environment import EnvironmentTool


@TOOLS.register("frozenlake")
class FrozenLakeTool(EnvironmentTool):
    name = "frozenlake"
    description = f"Move one step on the frozen lake and see the new grid. Legend: {FrozenLake.legend}."
    parameters = EnvironmentTool.action_parameters(tuple(MOVES))
    env_class = FrozenLake
