"""Catalog app: toolschemas."""
