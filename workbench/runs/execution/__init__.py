"""A run's attempt on a worker: claim, lease, train (one process or a DeepSpeed process group) into the
database sink, checkpoints in the artifact store, GPU placement, rollout dispatch, and the sweep that hands
on runs whose worker died."""
