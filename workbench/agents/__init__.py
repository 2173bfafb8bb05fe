"""Catalog app: agent programs."""
