"""Where run artifacts live (checkpoints, published weights, exported data): `ArtifactStore`, one
interface over a local directory or an S3-compatible object store, so every worker sees them."""

from trainers.storage.store import ArtifactStore, check_key

__all__ = ["ArtifactStore", "check_key"]
