"""Per-step metrics of a run and the RAGEN echo-trap detector that watches them."""

from trainers.metrics import keys
from trainers.metrics.echo_trap import Alert, EchoTrapConfig, EchoTrapDetector
from trainers.metrics.step_metrics import compute_step_metrics

__all__ = ["Alert", "EchoTrapConfig", "EchoTrapDetector", "compute_step_metrics", "keys"]
