"""Progress of a background job as the page sees it, and the heartbeats of live workers."""

import uuid

from django.db import models
from django.utils import timezone


class JobStatus(models.TextChoices):
    QUEUED = "queued", "Queued"
    RUNNING = "running", "Running"
    SUCCEEDED = "succeeded", "Succeeded"
    FAILED = "failed", "Failed"


class JobProgress(models.Model):
    id = models.UUIDField(primary_key=True, default=uuid.uuid4, editable=False)
    team = models.ForeignKey("accounts.Team", on_delete=models.CASCADE, related_name="+")
    kind = models.CharField(max_length=50)  # e.g. "dataset_validate"
    status = models.CharField(max_length=10, choices=JobStatus.choices, default=JobStatus.QUEUED)
    progress = models.FloatField(default=0.0)  # 0..1
    message = models.CharField(max_length=500, blank=True)
    error = models.TextField(blank=True)
    created_at = models.DateTimeField(auto_now_add=True)
    updated_at = models.DateTimeField(auto_now=True)

    class Meta:
        ordering = ["-created_at"]
        constraints = [
            models.CheckConstraint(
                condition=models.Q(progress__gte=0.0, progress__lte=1.0), name="jobs_progress_in_unit_range"
            )
        ]

    def __str__(self) -> str:
        return f"{self.kind} {self.status} {self.progress:.0%}"

    @property
    def is_finished(self) -> bool:
        return self.status in {JobStatus.SUCCEEDED, JobStatus.FAILED}

    @property
    def percent(self) -> int:
        return round(self.progress * 100)


class WorkerHeartbeat(models.Model):
    """Written every few seconds by each worker; a row not refreshed within the TTL is a dead worker."""

    hostname = models.CharField(max_length=255, unique=True)
    queues = models.JSONField(default=list)
    gpus = models.JSONField(default=list)  # [{"index": 0, "name": ..., "memory_gb": ...}]
    cpus = models.PositiveIntegerField(default=0)  # the cores its tasks may use (0: not reported)
    # What the code sandbox gets on this worker: {"mode": "root" | "userns" | "none" | "refused",
    # "isolation": {...}, "error": ..., "insecure_allowed": bool} ({} until the probe answered)
    sandbox = models.JSONField(default=dict, blank=True)
    pid = models.PositiveIntegerField()
    started_at = models.DateTimeField()
    last_seen = models.DateTimeField(db_index=True)

    class Meta:
        ordering = ["hostname"]

    def __str__(self) -> str:
        return self.hostname

    @property
    def sandbox_insecure(self) -> bool:
        """This worker may run model code without isolation (mode "none", or the override is set)."""
        return self.sandbox.get("mode") == "none" or bool(self.sandbox.get("insecure_allowed"))

    @property
    def seconds_since_seen(self) -> float:
        return (timezone.now() - self.last_seen).total_seconds()


class GpuAssignment(models.Model):
    """One GPU of one machine held by one attempt of a run; unique per (host, index), so two runs never
    hold the same GPU. Taken in the run's claim, deleted when the attempt ends or its worker is swept."""

    host = models.CharField(max_length=255)  # the machine: a Celery hostname's part after "@"
    index = models.PositiveIntegerField()  # as CUDA numbers it on that machine (CUDA_VISIBLE_DEVICES)
    worker = models.CharField(max_length=255)  # the Celery hostname that took it
    run = models.ForeignKey("runs.Run", on_delete=models.CASCADE, related_name="gpu_assignments")
    attempt = models.PositiveIntegerField()
    taken_at = models.DateTimeField(default=timezone.now)

    team_field = "run__team"  # seen by the run's team (accounts.access)

    class Meta:
        ordering = ["host", "index"]
        constraints = [models.UniqueConstraint(fields=["host", "index"], name="jobs_gpu_one_run_per_gpu")]

    def __str__(self) -> str:
        return f"{self.host} GPU {self.index}: run {self.run_id} attempt {self.attempt}"
