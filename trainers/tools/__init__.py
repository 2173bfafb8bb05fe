"""Tools the policy can call; importing this package registers the built-ins in TOOLS."""

from trainers.tools import calculator, env_server, frozenlake, http, mcp, python, search, sokoban
from trainers.tools.base import TOOLS, Tool, ToolOutput
from trainers.tools.toolset import ToolBinding, Toolset

__all__ = [
    "TOOLS",
    "Tool",
    "ToolBinding",
    "ToolOutput",
    "Toolset",
    "calculator",
    "env_server",
    "frozenlake",
    "http",
    "mcp",
    "python",
    "search",
    "sokoban",
]
