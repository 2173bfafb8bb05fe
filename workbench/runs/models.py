"""Runs launched from the browser and everything their worker streams back.

Every streamed row has a (run, step, key) identity enforced by a unique constraint, so a retried
batch or a resumed run overwrites instead of duplicating.
"""

from __future__ import annotations

from functools import cached_property

from django.conf import settings
from django.db import models
from django.urls import reverse

from trainers.workbench_api import RunConfig, validate_config


class Tag(models.Model):
    """A free label a team puts on runs (compare by tag)."""

    team = models.ForeignKey("accounts.Team", on_delete=models.CASCADE, related_name="run_tags")
    name = models.CharField(max_length=64)

    class Meta:
        constraints = [models.UniqueConstraint(fields=["team", "name"], name="runs_tag_unique_per_team")]
        ordering = ["name"]

    def __str__(self) -> str:
        return self.name


class RunStatus(models.TextChoices):
    QUEUED = "queued"
    RUNNING = "running"
    SUCCEEDED = "succeeded"
    FAILED = "failed"
    CANCELLED = "cancelled"


FINISHED_STATUSES = (RunStatus.SUCCEEDED, RunStatus.FAILED, RunStatus.CANCELLED)

# The evaluator reports `greedy/accuracy` and `sampled/accuracy` (a plain `accuracy` from other
# evaluators); the sink stores them under `eval/`. A run's headline accuracy is the first it logged.
EVAL_ACCURACY_KEYS = ("eval/greedy/accuracy", "eval/sampled/accuracy", "eval/accuracy")


class Run(models.Model):
    """One training run: an immutable config snapshot plus its lifecycle on a Celery worker."""

    team = models.ForeignKey("accounts.Team", on_delete=models.CASCADE, related_name="runs")
    created_by = models.ForeignKey(
        settings.AUTH_USER_MODEL, null=True, on_delete=models.SET_NULL, related_name="runs"
    )
    name = models.CharField(max_length=200)
    notes = models.TextField(blank=True)
    tags = models.ManyToManyField(Tag, blank=True, related_name="runs")
    is_baseline = models.BooleanField(default=False)
    cloned_from = models.ForeignKey("self", null=True, blank=True, on_delete=models.SET_NULL)

    # Written once by run_create and never updated: the run must stay reproducible.
    config = models.JSONField()
    # The catalog versions the config was composed from; PROTECT: a pinned version outlives its runs.
    dataset_version = models.ForeignKey(
        "datasets.DatasetVersion", null=True, blank=True, on_delete=models.PROTECT, related_name="+"
    )
    # The conversations the SFT warm start trained on (the worker writes them as the run's sft.data_path).
    sft_dataset_version = models.ForeignKey(
        "datasets.DatasetVersion", null=True, blank=True, on_delete=models.PROTECT, related_name="+"
    )
    prompt_version = models.ForeignKey(
        "prompts.PromptTemplateVersion", null=True, blank=True, on_delete=models.PROTECT, related_name="+"
    )
    reward_version = models.ForeignKey(
        "rewards.RewardDefinitionVersion", null=True, blank=True, on_delete=models.PROTECT, related_name="+"
    )
    tool_versions = models.ManyToManyField("toolschemas.ToolSchemaVersion", blank=True, related_name="+")
    # The agent program an agent run plays its episodes with (inlined as rollout.agent.source).
    agent_version = models.ForeignKey(
        "agents.AgentProgramVersion", null=True, blank=True, on_delete=models.PROTECT, related_name="+"
    )
    queue = models.CharField(max_length=64, default="cpu")

    status = models.CharField(max_length=16, choices=RunStatus.choices, default=RunStatus.QUEUED)
    celery_task_id = models.CharField(max_length=64, blank=True)
    worker = models.CharField(max_length=200, blank=True)
    gpus = models.JSONField(default=list, blank=True)  # the GPU indices its latest attempt got on `worker`
    attempts = models.PositiveIntegerField(default=0)
    cancel_requested = models.BooleanField(default=False)
    error = models.TextField(blank=True)
    log_tail = models.TextField(blank=True)
    last_step = models.IntegerField(null=True, blank=True)
    last_checkpoint_step = models.IntegerField(null=True, blank=True)
    # What the attempt reports it is doing between steps (trainers' Phase: loading, sft, starting_rl,
    # evaluating, saving, training); empty until it reports one. The status strip names it.
    phase = models.CharField(max_length=16, blank=True)
    # Bumped by every write of what the worker streams (ingest.py), in the same transaction: the pages'
    # ETags and shared caches key on it, so they never serve what was stored before it.
    data_version = models.PositiveBigIntegerField(default=0)

    created_at = models.DateTimeField(auto_now_add=True)
    started_at = models.DateTimeField(null=True, blank=True)
    finished_at = models.DateTimeField(null=True, blank=True)
    heartbeat_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        ordering = ["-created_at", "-id"]
        indexes = [models.Index(fields=["team", "-created_at"], name="runs_run_team_created")]

    def __str__(self) -> str:
        return self.name

    def get_absolute_url(self) -> str:
        return reverse("runs:detail", args=[self.pk])

    @cached_property
    def typed_config(self) -> RunConfig:
        """The config snapshot as the trainers read it (validated, defaults filled in): the one view the
        workbench reads a run's settings through; `config` stays the stored JSON."""
        return validate_config(self.config)

    @property
    def is_finished(self) -> bool:
        return self.status in FINISHED_STATUSES

    @property
    def wall_time_s(self) -> float | None:
        if self.started_at is None:
            return None
        end = self.finished_at or self.heartbeat_at or self.started_at
        return (end - self.started_at).total_seconds()


class MetricPoint(models.Model):
    """One scalar of one series at one step; the unique index (run, key, step) also serves the charts."""

    run = models.ForeignKey(Run, on_delete=models.CASCADE, related_name="metric_points")
    key = models.CharField(max_length=128)
    step = models.IntegerField()
    value = models.FloatField()

    class Meta:
        constraints = [
            models.UniqueConstraint(fields=["run", "key", "step"], name="runs_metricpoint_identity")
        ]


class MetricRollup(models.Model):
    """Min, max and last of one series over a bucket of 4**level steps (level >= 1).

    A pyramid of these lets a chart request read O(buckets) rows instead of every step, while keeping
    the exact extremes (a spike never disappears) and the last value of each bucket.
    """

    run = models.ForeignKey(Run, on_delete=models.CASCADE, related_name="metric_rollups")
    key = models.CharField(max_length=128)
    level = models.PositiveSmallIntegerField()
    bucket = models.IntegerField()
    min_value = models.FloatField()
    min_step = models.IntegerField()
    max_value = models.FloatField()
    max_step = models.IntegerField()
    last_value = models.FloatField()
    last_step = models.IntegerField()

    class Meta:
        constraints = [
            models.UniqueConstraint(
                fields=["run", "key", "level", "bucket"], name="runs_metricrollup_identity"
            )
        ]
        # Listing a run's series reads its few top-level rows instead of the whole pyramid.
        indexes = [models.Index(fields=["run", "level", "key"], name="runs_rollup_run_level_key")]


class TrajectoryRecord(models.Model):
    """One stored trajectory; the scalar columns exist so the inspector's filters hit indexes, not JSON."""

    run = models.ForeignKey(Run, on_delete=models.CASCADE, related_name="trajectories")
    step = models.IntegerField()
    key = models.CharField(max_length=200)  # "<group_id>/<sample_index>"
    group_id = models.CharField(max_length=160)
    sample_index = models.IntegerField(default=0)
    reward = models.FloatField()
    advantage = models.FloatField(null=True)
    correct = models.BooleanField(null=True)
    num_turns = models.IntegerField()
    num_tool_calls = models.IntegerField()
    num_failed_calls = models.IntegerField()
    length = models.IntegerField()  # response tokens
    tool_counts = models.JSONField(default=dict)  # {"calculator": 2}
    final_answer = models.CharField(max_length=300, blank=True)
    data = models.JSONField()  # Trajectory.to_dict()

    class Meta:
        constraints = [
            models.UniqueConstraint(fields=["run", "step", "key"], name="runs_trajectory_identity")
        ]
        indexes = [
            models.Index(fields=["run", "reward", "id"], name="runs_traj_run_reward"),
            models.Index(fields=["run", "length", "id"], name="runs_traj_run_length"),
            models.Index(fields=["run", "num_turns", "id"], name="runs_traj_run_turns"),
            models.Index(fields=["run", "num_tool_calls", "id"], name="runs_traj_run_tool_calls"),
            models.Index(fields=["run", "group_id", "step"], name="runs_traj_run_group_step"),
        ]


class Checkpoint(models.Model):
    """A saved checkpoint: `path` on the worker that wrote it, `url` its copy in the artifact store (any
    worker resumes from it; empty when it was not uploaded)."""

    run = models.ForeignKey(Run, on_delete=models.CASCADE, related_name="checkpoints")
    step = models.IntegerField()
    path = models.CharField(max_length=500)
    url = models.CharField(max_length=1000, blank=True, default="")
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        constraints = [models.UniqueConstraint(fields=["run", "step"], name="runs_checkpoint_identity")]
        ordering = ["step"]


class AlertSeverity(models.TextChoices):
    INFO = "info"
    WARNING = "warning"
    CRITICAL = "critical"


class Alert(models.Model):
    """An echo-trap (or other) detector finding: the step, the rule, and the numbers behind it."""

    run = models.ForeignKey(Run, on_delete=models.CASCADE, related_name="alerts")
    step = models.IntegerField()
    rule = models.CharField(max_length=64)
    message = models.TextField(blank=True)
    evidence = models.JSONField(default=dict)
    severity = models.CharField(max_length=16, choices=AlertSeverity.choices, default=AlertSeverity.WARNING)
    start_step = models.IntegerField(null=True)
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        constraints = [models.UniqueConstraint(fields=["run", "step", "rule"], name="runs_alert_identity")]
        ordering = ["step"]


class RecoveryOutcome(models.TextChoices):
    REQUEUED = "requeued", "Requeued by a sweep"  # a worker's sweep sent the run's task again
    TAKEN_OVER = "taken_over", "Taken over by a redelivery"  # a delivery found the lease expired
    GAVE_UP = "gave_up", "Given up"  # stranded on its last allowed attempt: the run failed


class RunRecovery(models.Model):
    """One time a run's worker stopped renewing its lease (it died or lost the database) and the run was
    handed on: what the stranded attempt had reached, who noticed, and where the run went on from."""

    team_field = "run__team"

    run = models.ForeignKey(Run, on_delete=models.CASCADE, related_name="recoveries")
    attempt = models.PositiveIntegerField()  # the stranded attempt
    worker = models.CharField(max_length=200, blank=True)  # its worker
    heartbeat_at = models.DateTimeField(null=True, blank=True)  # its last heartbeat
    last_step = models.IntegerField(null=True, blank=True)
    checkpoint_step = models.IntegerField(null=True, blank=True)
    detected_at = models.DateTimeField(auto_now_add=True)
    detected_by = models.CharField(max_length=200)  # the sweeping or claiming worker
    outcome = models.CharField(max_length=16, choices=RecoveryOutcome.choices)
    resumed_at = models.DateTimeField(null=True, blank=True)
    resumed_by = models.CharField(max_length=200, blank=True)
    resumed_from_step = models.IntegerField(null=True, blank=True)  # the checkpoint step; 0 without one

    class Meta:
        ordering = ["-detected_at", "-id"]
        indexes = [models.Index(fields=["-detected_at"], name="runs_recovery_detected")]

    def __str__(self) -> str:
        return f"run {self.run_id} attempt {self.attempt}: {self.outcome}"
