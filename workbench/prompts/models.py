"""Prompt templates: Jinja2 source for one template family, rendered only in the trainers sandbox."""

from django.db import models
from django.urls import reverse

from workbench.catalog.models import CatalogItem, CatalogVersion


class PromptTemplate(CatalogItem):
    list_url_name = "prompts:list"

    def get_absolute_url(self) -> str:
        return reverse("prompts:detail", args=[self.pk])


class PromptTemplateVersion(CatalogVersion):
    item = models.ForeignKey(PromptTemplate, on_delete=models.PROTECT, related_name="versions")
    # A name in trainers.templates.TEMPLATES: it decides stop strings and how responses are parsed.
    family = models.CharField(max_length=50)
    # Empty means the family's own prompt (for hf_native: the tokenizer's chat template).
    source = models.TextField(blank=True)
    description = models.TextField(blank=True)

    class Meta(CatalogVersion.Meta):
        pass

    def canonical_text(self) -> str:
        return f"family: {self.family}\ndescription: {self.description}\n\n{self.source}"
