"""Writes for prompt templates: every save is a new version, checked by rendering it in the sandbox."""

from django.core.exceptions import ValidationError

from workbench.accounts.models import Team
from workbench.catalog.services import catalog_item_create, catalog_version_create
from workbench.prompts.models import PromptTemplate, PromptTemplateVersion
from workbench.prompts.rendering import source_error


def _version(*, family: str, source: str, description: str, note: str) -> PromptTemplateVersion:
    error = source_error(family=family, source=source)
    if error is not None:
        raise ValidationError({"family" if error.startswith("unknown template family") else "source": error})
    return PromptTemplateVersion(family=family, source=source, description=description, note=note)


def prompt_template_create(
    *, team: Team, user, name: str, family: str, source: str, description: str = "", note: str = ""
) -> PromptTemplateVersion:
    version = _version(family=family, source=source, description=description, note=note)
    return catalog_item_create(item=PromptTemplate(team=team, name=name.strip()), version=version, user=user)


def prompt_template_update(
    *, item: PromptTemplate, user, family: str, source: str, description: str = "", note: str = ""
) -> PromptTemplateVersion:
    version = _version(family=family, source=source, description=description, note=note)
    return catalog_version_create(item=item, version=version, user=user)
