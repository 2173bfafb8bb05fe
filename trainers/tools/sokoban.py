"""The Sokoban environment as a tool: {"action": "up"|"down"|"left"|"right"}."""

from trainers.envs.base import MOVES
from trainers.envs.sokoban import Sokoban
from trainers.tools.base import TOOLS
from trainers.tools.environment import EnvironmentTool


@TOOLS.register("sokoban")
class SokobanTool(EnvironmentTool):
    name = "sokoban"
    description = f"Move or push one step in the Sokoban room and see the new grid. Legend: {Sokoban.legend}."
    parameters = EnvironmentTool.action_parameters(tuple(MOVES))
    env_class = Sokoban
