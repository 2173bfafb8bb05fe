"""A small read-only JSON API over prompt templates, scoped like the pages."""

from workbench.catalog import api as catalog_api
from workbench.prompts import selectors
from workbench.prompts.models import PromptTemplateVersion


def _version_fields(version: PromptTemplateVersion) -> dict:
    return {"family": version.family, "source": version.source, "description": version.description}


def prompt_template_list(request):
    items = selectors.prompt_template_list(user=request.user, team=None)
    return catalog_api.list_response(key="prompt_templates", items=items)


def prompt_template_detail(request, pk: int):
    item = selectors.prompt_template_get(user=request.user, pk=pk)
    version = selectors.prompt_template_version_get(item=item, number=None)
    return catalog_api.detail_response(item=item, version=version, version_fields=_version_fields)
