"""Agents as rollouts: an OpenAI-compatible endpoint that records every sampled token, and agent
programs run in the sandbox against it."""
