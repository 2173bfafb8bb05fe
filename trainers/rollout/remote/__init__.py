"""Rollouts as jobs on other workers: the second implementation of the `Rollouts` protocol.

The trainer's `RemoteRollouts` (`client`) publishes the policy's weights as a version in the artifact
store, splits the step's rows into jobs of whole groups (`wire`) and hands them to a `Dispatcher`
(`dispatch`: a process pool here, Celery's rollout queue in the workbench). On each worker a
`RolloutWorkerState` (`worker`) keeps the model loaded, loads a version only when a job asks for
another, and runs the job with `RolloutEngine.run`: sampling seeds derive from (seed, group id, sample,
turn), so a trajectory is the one the in-process engine samples, however the rows were split. A job
whose result does not come in time is sent again; the first result of a job counts, later ones are
dropped.
"""
