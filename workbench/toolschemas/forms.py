"""Forms of the tool schema app; the built-in choices come from the trainers tool registry."""

from django import forms

from workbench.catalog.selectors import latest_versions
from workbench.toolschemas.models import Implementation, ToolSchemaVersion
from workbench.toolschemas.services import builtin_names


def _builtin_choices() -> list[tuple[str, str]]:
    return [("", "—")] + [(name, name) for name in builtin_names()]


def _written_choices() -> list[tuple[str, str]]:
    """What a member writes by hand: MCP tools come from an import only."""
    return [(value, label) for value, label in Implementation.choices if value != Implementation.MCP]


class ToolSchemaForm(forms.Form):
    function_name = forms.CharField(max_length=64, help_text="The name the model writes in a call.")
    description = forms.CharField(widget=forms.Textarea(attrs={"rows": 2}))
    parameters = forms.JSONField(
        widget=forms.Textarea(attrs={"rows": 10, "class": "code"}), help_text="JSON Schema of the arguments."
    )
    implementation = forms.ChoiceField(choices=_written_choices, widget=forms.RadioSelect)
    builtin = forms.ChoiceField(choices=_builtin_choices, required=False, label="Built-in tool")
    url = forms.URLField(
        required=False,
        label="Endpoint URL",
        assume_scheme="https",
        help_text="An HTTP endpoint, or an environment server's base URL: saving asks it for its actions.",
    )
    timeout_s = forms.FloatField(initial=10.0, label="Timeout (s)")
    note = forms.CharField(max_length=200, required=False, help_text="What changed in this version.")


class ToolSchemaCreateForm(ToolSchemaForm):
    name = forms.CharField(max_length=100, help_text="The catalog name of this schema.")
    field_order = ["name"]


class McpToolSchemaForm(forms.Form):
    """An imported MCP tool's edit: what the model reads and the call's timeout; the server, tool and input
    schema stay as imported (import again to update them)."""

    description = forms.CharField(widget=forms.Textarea(attrs={"rows": 2}))
    timeout_s = forms.FloatField(label="Timeout (s)")
    note = forms.CharField(max_length=200, required=False, help_text="What changed in this version.")


class McpImportForm(forms.Form):
    """The tools of one server to import; the choices are the server's tools as it lists them now."""

    tools = forms.MultipleChoiceField(widget=forms.CheckboxSelectMultiple, label="Tools to import")
    prefix = forms.RegexField(
        regex=r"^[A-Za-z0-9_-]{0,32}$",
        required=False,
        label="Name prefix",
        help_text="Put before each tool's name (e.g. web_), when the catalog already has one of the names.",
        error_messages={"invalid": "Use up to 32 letters, digits, underscores or hyphens."},
    )

    def __init__(self, *args, tool_names: list[str], **kwargs) -> None:
        super().__init__(*args, **kwargs)
        self.fields["tools"].choices = [(name, name) for name in tool_names]


class TryForm(forms.Form):
    arguments = forms.CharField(widget=forms.Textarea(attrs={"rows": 4, "class": "code"}), initial="{}")


class ToolVersionsChoice(forms.ModelMultipleChoiceField):
    """Tool schema selects; use in a TeamScopedFormMixin form so it offers only the user's teams'."""

    def __init__(self, **kwargs):
        super().__init__(queryset=latest_versions(ToolSchemaVersion), **kwargs)

    def label_from_instance(self, obj) -> str:
        return f"{obj.item.name} ({obj.function_name}) v{obj.number}"
