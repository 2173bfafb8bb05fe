"""A run config at launch: the operator's bounds on what it may use, and what it needs from its catalog
pins."""
