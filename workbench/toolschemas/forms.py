"""Forms of the tool schema app; the built-in choices come from the trainers tool registry."""

from django import forms

from workbench.catalog.selectors import latest_versions
from workbench.toolschemas.models import Implementation, ToolSchemaVersion
from workbench.toolschemas.services import builtin_names


def _builtin_choices() -> list[tuple[str, str]]:
    return [("", "—")] + [(name, name) for name in builtin_names()]


class ToolSchemaForm(forms.Form):
    function_name = forms.CharField(max_length=64, help_text="The name the model writes in a call.")
    description = forms.CharField(widget=forms.Textarea(attrs={"rows": 2}))
    parameters = forms.JSONField(
        widget=forms.Textarea(attrs={"rows": 10, "class": "code"}), help_text="JSON Schema of the arguments."
    )
    implementation = forms.ChoiceField(choices=Implementation.choices, widget=forms.RadioSelect)
    builtin = forms.ChoiceField(choices=_builtin_choices, required=False, label="Built-in tool")
    url = forms.URLField(required=False, label="Endpoint URL", assume_scheme="https")
    timeout_s = forms.FloatField(initial=10.0, label="Timeout (s)")
    note = forms.CharField(max_length=200, required=False, help_text="What changed in this version.")


class ToolSchemaCreateForm(ToolSchemaForm):
    name = forms.CharField(max_length=100, help_text="The catalog name of this schema.")
    field_order = ["name"]


class TryForm(forms.Form):
    arguments = forms.CharField(widget=forms.Textarea(attrs={"rows": 4, "class": "code"}), initial="{}")


class ToolVersionsChoice(forms.ModelMultipleChoiceField):
    """Tool schema selects; use in a TeamScopedFormMixin form so it offers only the user's teams'."""

    def __init__(self, **kwargs):
        super().__init__(queryset=latest_versions(ToolSchemaVersion), **kwargs)

    def label_from_instance(self, obj) -> str:
        return f"{obj.item.name} ({obj.function_name}) v{obj.number}"
