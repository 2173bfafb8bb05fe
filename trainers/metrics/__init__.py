"""Per-step metrics of a run and the RAGEN echo-trap detector that watches them."""
