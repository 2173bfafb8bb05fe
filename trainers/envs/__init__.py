"""Environments for multi-turn RL; importing this package registers the built-in ones."""

from trainers.envs.base import ENVIRONMENTS, Environment
from trainers.envs.frozenlake import FrozenLake
from trainers.envs.sokoban import Sokoban

__all__ = ["ENVIRONMENTS", "Environment", "FrozenLake", "Sokoban"]
