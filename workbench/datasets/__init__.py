"""Catalog app: datasets."""
