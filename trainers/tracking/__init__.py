"""Mirrors of a run's metrics to experiment trackers (W&B, MLflow, TensorBoard, Trackio).

`MirrorSink` wraps a run's own sink and hands copies of its records to the trackers on a background thread;
each tracker module is imported only when a run config names it.
"""
