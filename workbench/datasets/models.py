"""Datasets: a versioned, team-owned collection of rows, and the uploads that create its versions.

An upload is processed by a Celery task in one transaction: either every row is stored with a new
version, or nothing is (the upload keeps the row-by-row errors for the page to show).
"""

import json

from django.conf import settings
from django.db import models
from django.urls import reverse

from workbench.catalog.models import CatalogItem, CatalogVersion
from workbench.datasets.parsing import FORMATS
from workbench.datasets.splits import EVAL, TRAIN


class DatasetKind(models.TextChoices):
    """What the rows are: RL prompts with their ground truth, or expert conversations for SFT."""

    PROMPTS = "prompts", "Prompts (RL: a question and its ground truth)"
    CONVERSATIONS = "conversations", "Conversations (SFT: messages with tool calls and tool responses)"


class SplitMethod(models.TextChoices):
    RATIO = "ratio", "Random, by ratio and seed"
    COLUMN = "column", "By the value of a column"


class Dataset(CatalogItem):
    list_url_name = "datasets:list"

    # Every version of a dataset holds the same kind of rows; runs pin prompts as RL data and
    # conversations as SFT data.
    kind = models.CharField(max_length=16, choices=DatasetKind.choices, default=DatasetKind.PROMPTS)

    def get_absolute_url(self) -> str:
        return reverse("datasets:detail", args=[self.pk])


class DatasetVersion(CatalogVersion):
    item = models.ForeignKey(Dataset, on_delete=models.PROTECT, related_name="versions")
    description = models.TextField(blank=True)
    file = models.FileField(upload_to="datasets/%Y/%m/", max_length=300)
    source_name = models.CharField(max_length=255)  # the uploaded file's own name, shown to users
    file_format = models.CharField(max_length=10, choices=[(f, f.upper()) for f in FORMATS])
    file_size = models.BigIntegerField()
    split_method = models.CharField(max_length=10, choices=SplitMethod.choices, default=SplitMethod.RATIO)
    eval_ratio = models.FloatField(default=0.1)
    split_seed = models.IntegerField(default=0)
    split_column = models.CharField(max_length=100, blank=True)
    # Filled by the upload task inside the transaction that creates the version, before anyone sees it.
    row_count = models.PositiveIntegerField(default=0)
    train_count = models.PositiveIntegerField(default=0)
    eval_count = models.PositiveIntegerField(default=0)
    statistics = models.JSONField(default=dict, blank=True)

    class Meta(CatalogVersion.Meta):
        pass

    def split_label(self) -> str:
        if self.split_method == SplitMethod.COLUMN:
            return f"by column {self.split_column!r}"
        return f"random, {self.eval_ratio:.0%} eval, seed {self.split_seed}"

    def canonical_text(self) -> str:
        content = {
            "description": self.description,
            "file": {"name": self.source_name, "format": self.file_format, "bytes": self.file_size},
            "split": self.split_label(),
            "rows": {"total": self.row_count, "train": self.train_count, "eval": self.eval_count},
            "statistics": self.statistics,
        }
        return json.dumps(content, indent=2, sort_keys=True, ensure_ascii=False)


class DatasetRow(models.Model):
    """One validated row; the JSON fields keep ground-truth tool calls and environment state as given."""

    version = models.ForeignKey(DatasetVersion, on_delete=models.CASCADE, related_name="rows")
    index = models.PositiveIntegerField()  # 0-based position in the file
    split = models.CharField(max_length=5, choices=[(TRAIN, "train"), (EVAL, "eval")], default=TRAIN)
    prompt = models.TextField()
    answer = models.TextField(null=True, blank=True)
    tool_calls = models.JSONField(null=True, blank=True)
    initial_state = models.JSONField(null=True, blank=True)
    metadata = models.JSONField(default=dict, blank=True)
    # A conversations dataset's row: the validated messages (the prompt is the first user message).
    messages = models.JSONField(null=True, blank=True)

    team_field = "version__item__team"

    class Meta:
        ordering = ["index"]
        constraints = [models.UniqueConstraint(fields=["version", "index"], name="datasets_row_unique_index")]
        indexes = [models.Index(fields=["version", "split", "index"])]

    def ground_truth(self) -> dict:
        """What rewards compare against: the answer and/or the tool calls."""
        truth: dict = {}
        if self.answer is not None:
            truth["answer"] = self.answer
        if self.tool_calls is not None:
            truth["tool_calls"] = self.tool_calls
        return truth


class UploadStatus(models.TextChoices):
    PENDING = "pending", "Waiting for a worker"
    RUNNING = "running", "Validating"
    FAILED = "failed", "Invalid"
    DONE = "done", "Stored"


class DatasetUpload(models.Model):
    """A file waiting to become a dataset version (a new dataset when `dataset` is empty)."""

    team = models.ForeignKey("accounts.Team", on_delete=models.CASCADE, related_name="+")
    created_by = models.ForeignKey(
        settings.AUTH_USER_MODEL, on_delete=models.SET_NULL, null=True, related_name="+"
    )
    created_at = models.DateTimeField(auto_now_add=True)
    dataset = models.ForeignKey(
        Dataset, on_delete=models.CASCADE, null=True, blank=True, related_name="uploads"
    )
    name = models.CharField(max_length=100)
    kind = models.CharField(max_length=16, choices=DatasetKind.choices, default=DatasetKind.PROMPTS)
    description = models.TextField(blank=True)
    note = models.CharField(max_length=200, blank=True)
    file = models.FileField(upload_to="datasets/%Y/%m/", max_length=300)
    source_name = models.CharField(max_length=255)
    file_format = models.CharField(max_length=10)
    split_method = models.CharField(max_length=10, choices=SplitMethod.choices, default=SplitMethod.RATIO)
    eval_ratio = models.FloatField(default=0.1)
    split_seed = models.IntegerField(default=0)
    split_column = models.CharField(max_length=100, blank=True)
    status = models.CharField(max_length=10, choices=UploadStatus.choices, default=UploadStatus.PENDING)
    errors = models.JSONField(default=list, blank=True)
    job = models.OneToOneField("jobs.JobProgress", on_delete=models.SET_NULL, null=True, related_name="+")
    version = models.OneToOneField(
        DatasetVersion, on_delete=models.SET_NULL, null=True, blank=True, related_name="upload"
    )

    class Meta:
        ordering = ["-created_at"]

    def __str__(self) -> str:
        return f"upload of {self.source_name} as {self.name}"

    def get_absolute_url(self) -> str:
        return reverse("datasets:upload", args=[self.pk])
