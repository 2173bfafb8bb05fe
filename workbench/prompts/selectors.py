"""Reads for prompt templates, always scoped to the user's teams."""

from django.db.models import QuerySet
from django.http import Http404

from workbench.accounts.access import get_scoped_or_404
from workbench.accounts.models import Role, Team
from workbench.catalog.selectors import catalog_items_for
from workbench.prompts.models import PromptTemplate, PromptTemplateVersion


def prompt_template_list(*, user, team: Team | None) -> QuerySet[PromptTemplate]:
    return catalog_items_for(model=PromptTemplate, user=user, team=team)


def prompt_template_get(*, user, pk, min_role: str = Role.VIEWER) -> PromptTemplate:
    return get_scoped_or_404(PromptTemplate, user, pk, min_role=min_role)


def prompt_template_version_get(*, item: PromptTemplate, number: int | None) -> PromptTemplateVersion:
    versions = item.versions.select_related("created_by")
    version = versions.filter(number=number).first() if number else versions.order_by("-number").first()
    if version is None:
        raise Http404
    return version
