"""Agent programs: Python defining `run(task, client)`, played in the sandbox against a run's policy
(docs/agents.md); a run with `rollout.backend: agent` pins a version and inlines its source."""

from django.db import models
from django.urls import reverse

from workbench.catalog.models import CatalogItem, CatalogVersion


class AgentProgram(CatalogItem):
    list_url_name = "agents:list"

    def get_absolute_url(self) -> str:
        return reverse("agents:detail", args=[self.pk])


class AgentProgramVersion(CatalogVersion):
    item = models.ForeignKey(AgentProgram, on_delete=models.PROTECT, related_name="versions")
    source = models.TextField()
    description = models.TextField(blank=True)

    class Meta(CatalogVersion.Meta):
        pass

    def canonical_text(self) -> str:
        return f"description: {self.description}\n\n{self.source}"
