"""A run's sink with its metric mirrors, from the config's `tracking:` section."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

from trainers.tracking.base import build_tracker
from trainers.tracking.mirror import MirrorSink

if TYPE_CHECKING:
    from trainers.config.schema import RunConfig
    from trainers.training.sinks import Sink


def with_mirrors(config: RunConfig, sink: Sink, *, resume: bool) -> Sink:
    """`sink` alone when the config mirrors nowhere; otherwise a `MirrorSink` around it that continues the
    tracker runs recorded in the run directory when `resume`."""
    enabled = config.tracking.enabled() if config.tracking is not None else {}
    if not enabled:
        return sink
    run_dir = Path(config.output_dir)
    trackers = [build_tracker(name, section, run_dir) for name, section in enabled.items()]
    snapshot = config.model_dump(mode="json", exclude={"tracking"})
    return MirrorSink(sink, trackers, run_dir, run_name=config.name, config=snapshot, resume=resume)
