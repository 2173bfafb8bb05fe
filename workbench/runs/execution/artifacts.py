"""A run's checkpoints in the shared artifact store (settings.ARTIFACTS_URL), so the run resumes on any
worker: the worker writes a checkpoint into its own run directory, the sink uploads it to
`runs/<run id>/checkpoints/<name>` and records its store URL (`Checkpoint.url`) beside the local path,
and the next attempt downloads the newest one into its own run directory when it cannot read it there.
"""

from __future__ import annotations

import logging
from pathlib import Path

from django.conf import settings

from trainers.workbench_api import ArtifactStore

from ..models import Checkpoint

logger = logging.getLogger(__name__)
BEST = "best"  # the trainer's checkpoints/best: the best evaluation so far (checkpoint.keep_best)
STATE_FILE = "trainer_state.pt"  # written last by the trainer: its change marks a new best checkpoint


def artifact_store() -> ArtifactStore:
    return ArtifactStore.from_url(settings.ARTIFACTS_URL)


def checkpoints_key(run_id: int) -> str:
    return f"runs/{run_id}/checkpoints"


def _step_of(key: str) -> int:
    return int(key.rsplit("_", 1)[1])


class CheckpointMirror:
    """Copies what the trainer writes under `<run dir>/checkpoints` to the store: each recorded checkpoint,
    the best one whenever it changes, and prunes the store to the newest `keep` as the trainer does."""

    def __init__(self, run_id: int, run_dir: Path, *, store: ArtifactStore, keep: int) -> None:
        self.run_id, self.local, self.store, self.keep = run_id, Path(run_dir) / "checkpoints", store, keep
        self._best_seen: tuple[int, int] | None = None

    def upload(self, path: Path) -> str:
        """Upload one checkpoint directory; its store URL."""
        return self.store.put_dir(Path(path), f"{checkpoints_key(self.run_id)}/{Path(path).name}")

    def prune(self) -> None:
        """Delete the store's step checkpoints older than the newest `keep` (their rows stay, unreadable)."""
        keys = self.store.list_dirs(checkpoints_key(self.run_id))
        steps = [key for key in keys if key.rsplit("/", 1)[1].startswith("step_")]
        for key in sorted(steps, key=_step_of)[: -self.keep]:
            self.store.delete(key)

    def sync_best(self) -> None:
        """Upload checkpoints/best when the trainer wrote a new one since the last look."""
        state = self.local / BEST / STATE_FILE
        if not state.exists():
            return
        stat = state.stat()
        seen = (stat.st_mtime_ns, stat.st_size)
        if seen != self._best_seen:
            self.upload(self.local / BEST)
            self._best_seen = seen

    def fetch_best(self) -> None:
        """A resumed attempt's run directory gets the store's best checkpoint too, when it has none (a
        failure is logged: the run resumes without it)."""
        key = f"{checkpoints_key(self.run_id)}/{BEST}"
        try:
            if not (self.local / BEST).exists() and self.store.exists(key):
                self.store.get_dir(key, self.local / BEST)
                stat = (self.local / BEST / STATE_FILE).stat()
                self._best_seen = (stat.st_mtime_ns, stat.st_size)
        except Exception:
            logger.exception("run %s: could not fetch the best checkpoint from the store", self.run_id)


def checkpoint_local(checkpoint: Checkpoint, *, run_dir: Path, store: ArtifactStore | None) -> Path | None:
    """Where this worker reads `checkpoint`: the path its worker wrote (when this is that machine, or one
    sharing its disk), else this worker's run directory's copy, else a download from the store into that
    directory; None when it can read none of them."""
    if Path(checkpoint.path).exists():
        return Path(checkpoint.path)
    if not checkpoint.url:
        return None
    local = Path(run_dir) / "checkpoints" / checkpoint.url.rstrip("/").rsplit("/", 1)[1]
    if (local / STATE_FILE).exists():
        return local
    if store is None or not checkpoint.url.startswith(store.url + "/"):
        logger.warning("checkpoint %s is not in the configured artifact store %s", checkpoint.url,
                       store.url if store else None)  # fmt: skip
        return None
    key = checkpoint.url[len(store.url) + 1 :]
    if not store.exists(key):
        return None
    logger.info("run %s: downloading checkpoint %s", checkpoint.run_id, checkpoint.url)
    return store.get_dir(key, local)
