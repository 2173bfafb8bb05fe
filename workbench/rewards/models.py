"""Reward definitions: a weighted sum of trainers reward components, each with parameters and a schedule."""

import json

from django.db import models
from django.urls import reverse

from trainers.workbench_api import RewardDefinition as TrainersDefinition
from workbench.catalog.models import CatalogItem, CatalogVersion


class RewardDefinition(CatalogItem):
    list_url_name = "rewards:list"

    def get_absolute_url(self) -> str:
        return reverse("rewards:detail", args=[self.pk])


class RewardDefinitionVersion(CatalogVersion):
    item = models.ForeignKey(RewardDefinition, on_delete=models.PROTECT, related_name="versions")
    description = models.TextField(blank=True)
    # trainers.rewards.RewardDefinition as JSON: {"components": [{name, label, weight, params, schedule}]}
    definition = models.JSONField()

    class Meta(CatalogVersion.Meta):
        pass

    def build(self) -> TrainersDefinition:
        return TrainersDefinition.model_validate(self.definition)

    @property
    def components(self) -> list[dict]:
        return self.definition.get("components", [])

    def canonical_text(self) -> str:
        content = {"description": self.description, "definition": self.definition}
        return json.dumps(content, indent=2, sort_keys=True, ensure_ascii=False)
