"""Agent RL Workbench trainers: tool-integrated multi-turn RL for LLMs (no Django imports)."""

__version__ = "0.1.0"
