"""Small stored datasets for tests that launch runs: prompts (RL rows) and expert conversations (SFT)."""

from __future__ import annotations

import json

from django.core.files.base import ContentFile


def stored_version(team, user, name: str, rows: list[dict], kind: str = "prompts"):
    """A dataset of `rows` (all in the train split), validated and stored as version 1; the team's
    dataset of that name when it has one already."""
    from workbench.datasets.models import Dataset
    from workbench.datasets.services import dataset_upload_create

    existing = Dataset.objects.filter(team=team, name=name, is_deleted=False).first()
    if existing is not None:
        return existing.latest_version()

    content = "".join(json.dumps(row) + "\n" for row in rows).encode()
    upload = dataset_upload_create(
        team=team, user=user, name=name, kind=kind, file=ContentFile(content, name=f"{name}.jsonl"),
        eval_ratio=0.0, process_now=True,
    )  # fmt: skip
    assert upload.version is not None, upload.errors
    return upload.version


def prompts_version(team, user, name: str = "prompts", n: int = 8):
    rows = [{"question": f"What is {i} + 2?", "answer": str(i + 2)} for i in range(n)]
    return stored_version(team, user, name, rows)


def conversations_version(team, user, name: str = "experts", n: int = 8):
    from trainers.workbench_api import demo_expert_conversations

    return stored_version(team, user, name, demo_expert_conversations(n), kind="conversations")
