"""Catalog app: prompts."""
