"""Catalog app: rewards."""
