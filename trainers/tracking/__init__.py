"""Mirrors of a run's metrics to experiment trackers (W&B, MLflow, TensorBoard, Trackio).

The trackers, their registry and the worker thread each runs on; `trainers/training/mirror_sink.py`'s
`MirrorSink` feeds them. Each tracker module is imported only when a run config names it.
"""
