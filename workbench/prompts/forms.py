"""Forms of the prompt template app; families come from trainers.templates.TEMPLATES."""

from django import forms

from workbench.accounts.access import TeamScopedFormMixin
from workbench.datasets.forms import DatasetVersionChoice
from workbench.prompts.rendering import family_names
from workbench.prompts.tokenizers import TINY
from workbench.toolschemas.forms import ToolVersionsChoice


def _family_choices() -> list[tuple[str, str]]:
    return [(name, name) for name in family_names()]


class PromptTemplateForm(forms.Form):
    family = forms.ChoiceField(
        choices=_family_choices, help_text="Decides stop strings and response parsing."
    )
    source = forms.CharField(
        widget=forms.Textarea(attrs={"rows": 18, "class": "code", "spellcheck": "false"}),
        required=False,
        help_text="Jinja2: question, tools, tools_json, tool_names, observation. Empty: the family's own.",
    )
    description = forms.CharField(widget=forms.Textarea(attrs={"rows": 2}), required=False)
    note = forms.CharField(max_length=200, required=False, help_text="What changed in this version.")


class PromptTemplateCreateForm(PromptTemplateForm):
    name = forms.CharField(max_length=100)
    field_order = ["name"]


class PreviewForm(TeamScopedFormMixin, forms.Form):
    """What to render the template with: a dataset row (or a typed question), tools and a tokenizer.

    The mixin limits both choice lists to the user's teams: another team's id is an invalid choice."""

    dataset = DatasetVersionChoice(required=False, label="Dataset")
    row_index = forms.IntegerField(min_value=0, initial=0, required=False, label="Row")
    question = forms.CharField(
        required=False, widget=forms.Textarea(attrs={"rows": 2}), label="Or a question"
    )
    tools = ToolVersionsChoice(required=False)
    tokenizer = forms.CharField(
        initial=TINY, help_text="tiny (bundled) or the absolute path of a tokenizer under a model root."
    )
