"""Evaluations: a model (the tiny demo model, a local path, or a checkpoint of a team run) scored on one
split of a dataset version, with its metrics and every trajectory it sampled.

The config snapshot (an EvalConfig without its data file and directory) is written once at creation; the
worker exports the split's rows and evaluates it on the rollout queue.
"""

from __future__ import annotations

from django.conf import settings
from django.db import models
from django.urls import reverse


class EvaluationStatus(models.TextChoices):
    QUEUED = "queued"
    RUNNING = "running"
    SUCCEEDED = "succeeded"
    FAILED = "failed"


FINISHED_STATUSES = (EvaluationStatus.SUCCEEDED, EvaluationStatus.FAILED)


class ModelSource(models.TextChoices):
    TINY = "tiny", "the tiny demo model"
    PATH = "path", "a local model directory"
    CHECKPOINT = "checkpoint", "a checkpoint of a run"


class Split(models.TextChoices):
    EVAL = "eval"
    TRAIN = "train"


class Evaluation(models.Model):
    """One evaluation job: what was evaluated on what, how it ran, and its metrics."""

    team = models.ForeignKey("accounts.Team", on_delete=models.CASCADE, related_name="evaluations")
    created_by = models.ForeignKey(
        settings.AUTH_USER_MODEL, null=True, on_delete=models.SET_NULL, related_name="evaluations"
    )
    name = models.CharField(max_length=200)
    source = models.CharField(max_length=16, choices=ModelSource.choices)
    # SET_NULL: a run's pruned checkpoint leaves its evaluations on the leaderboard (model_label names it)
    checkpoint = models.ForeignKey(
        "runs.Checkpoint", null=True, blank=True, on_delete=models.SET_NULL, related_name="evaluations"
    )
    run = models.ForeignKey("runs.Run", null=True, blank=True, on_delete=models.SET_NULL, related_name="+")
    model_label = models.CharField(max_length=300)  # "tiny", the path, or "<run> @ step N"
    # evaluation.runner "jobs": scheduled for the run's checkpoint at this step; its metrics join the run's
    # eval/ series (greedy/... or sampled/..., as the inline evaluator names them)
    automatic = models.BooleanField(default=False)
    mode = models.CharField(max_length=8, blank=True)  # "greedy" | "sampled" for an automatic one
    dataset_version = models.ForeignKey(
        "datasets.DatasetVersion", on_delete=models.PROTECT, related_name="evaluations"
    )
    split = models.CharField(max_length=5, choices=Split.choices, default=Split.EVAL)
    prompt_version = models.ForeignKey(
        "prompts.PromptTemplateVersion", null=True, blank=True, on_delete=models.PROTECT, related_name="+"
    )
    reward_version = models.ForeignKey(
        "rewards.RewardDefinitionVersion", null=True, blank=True, on_delete=models.PROTECT, related_name="+"
    )
    tool_versions = models.ManyToManyField("toolschemas.ToolSchemaVersion", blank=True, related_name="+")
    samples = models.PositiveIntegerField(default=4)  # k: samples per prompt
    config = models.JSONField()  # the EvalConfig snapshot, without data_path and output_dir
    queue = models.CharField(max_length=64, default="rollout")

    status = models.CharField(
        max_length=16, choices=EvaluationStatus.choices, default=EvaluationStatus.QUEUED
    )
    celery_task_id = models.CharField(max_length=64, blank=True)
    worker = models.CharField(max_length=200, blank=True)
    metrics = models.JSONField(default=dict, blank=True)  # NaN stored as null
    error = models.TextField(blank=True)
    created_at = models.DateTimeField(auto_now_add=True)
    started_at = models.DateTimeField(null=True, blank=True)
    finished_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        ordering = ["-created_at", "-id"]
        indexes = [
            models.Index(fields=["team", "-created_at"], name="evals_team_created"),
            models.Index(fields=["dataset_version", "status"], name="evals_version_status"),
        ]

    def __str__(self) -> str:
        return self.name

    def get_absolute_url(self) -> str:
        return reverse("evaluations:detail", args=[self.pk])

    @property
    def is_finished(self) -> bool:
        return self.status in FINISHED_STATUSES

    @property
    def pass_at_k(self) -> float | None:
        """pass@k at this evaluation's k (pass@1 when k is 1)."""
        return self.metrics.get(f"pass@{self.samples}" if self.samples > 1 else "pass@1")

    @property
    def seconds(self) -> float | None:
        if self.started_at is None or self.finished_at is None:
            return None
        return (self.finished_at - self.started_at).total_seconds()


class EvaluationTrajectory(models.Model):
    """One sampled trajectory, with the columns of a run's TrajectoryRecord (the same inspector shows it)."""

    team_field = "evaluation__team"

    evaluation = models.ForeignKey(Evaluation, on_delete=models.CASCADE, related_name="trajectories")
    key = models.CharField(max_length=200)  # "<group_id>/<sample_index>"
    group_id = models.CharField(max_length=160)
    sample_index = models.IntegerField(default=0)
    reward = models.FloatField()
    correct = models.BooleanField(null=True)
    num_turns = models.IntegerField()
    num_tool_calls = models.IntegerField()
    num_failed_calls = models.IntegerField()
    length = models.IntegerField()  # response tokens
    tool_counts = models.JSONField(default=dict)
    final_answer = models.CharField(max_length=300, blank=True)
    data = models.JSONField()  # Trajectory.to_dict()

    class Meta:
        constraints = [
            models.UniqueConstraint(fields=["evaluation", "key"], name="evals_trajectory_identity")
        ]
        ordering = ["group_id", "sample_index"]
