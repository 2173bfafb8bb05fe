"""Shared versioning base of the four catalog apps (datasets, tool schemas, prompt templates, rewards)."""
