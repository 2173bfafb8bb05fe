"""Forms of the reward app: components (choices from trainers.rewards.REWARDS) and the sample test."""

from django import forms

from trainers.workbench_api import TEMPLATES
from workbench.accounts.access import TeamScopedFormMixin
from workbench.datasets.forms import DatasetVersionChoice
from workbench.rewards.definitions import component_errors, component_names

JSON_AREA = {"rows": 2, "class": "code", "spellcheck": "false"}


class OptionalJSONField(forms.JSONField):
    """An optional JSON input that shows empty, not `null`, when it has no value."""

    def prepare_value(self, value):
        return "" if value is None else super().prepare_value(value)


def _component_choices() -> list[tuple[str, str]]:
    return [("", "—")] + [(name, name) for name in component_names()]


class ComponentForm(forms.Form):
    """One term of the weighted sum; its params are checked by the component's own pydantic model."""

    name = forms.ChoiceField(choices=_component_choices, required=False, label="Component")
    label = forms.CharField(max_length=50, required=False, help_text="Key of the score; needed for repeats.")
    weight = forms.FloatField(initial=1.0, required=False)
    params = forms.JSONField(initial=dict, required=False, widget=forms.Textarea(attrs=JSON_AREA))
    schedule = OptionalJSONField(
        required=False,
        widget=forms.Textarea(attrs=JSON_AREA),
        help_text='e.g. {"name": "linear", "start": 0, "end": 1, "steps": 100}',
    )

    def clean(self):
        data = super().clean()
        if data.get("name"):
            errors = component_errors(
                name=data["name"], params=data.get("params") or {}, schedule=data.get("schedule")
            )
            for field, messages in errors.items():
                for message in messages:
                    self.add_error(field, message)
        return data

    def component(self) -> dict | None:
        """The component as the trainers definition takes it, or None for an empty or deleted row."""
        data = self.cleaned_data
        if not data.get("name") or data.get("DELETE"):
            return None
        return {
            "name": data["name"],
            "label": data["label"] or None,
            "weight": 1.0 if data["weight"] is None else data["weight"],
            "params": data["params"] or {},
            "schedule": data["schedule"] or None,
        }


ComponentFormSet = forms.formset_factory(ComponentForm, extra=2, can_delete=True)


class RewardDefinitionForm(forms.Form):
    description = forms.CharField(widget=forms.Textarea(attrs={"rows": 2}), required=False)
    note = forms.CharField(max_length=200, required=False, help_text="What changed in this version.")


class RewardDefinitionCreateForm(RewardDefinitionForm):
    name = forms.CharField(max_length=100)
    field_order = ["name"]


def _template_choices() -> list[tuple[str, str]]:
    return [(name, name) for name in TEMPLATES.names()]


class SampleForm(TeamScopedFormMixin, forms.Form):
    """A model output and its ground truth, typed or taken from a dataset row of the user's teams."""

    text = forms.CharField(widget=forms.Textarea(attrs={"rows": 6, "class": "code"}), label="Model output")
    template = forms.ChoiceField(choices=_template_choices, initial="qwen_tool", help_text="How to parse it.")
    answer = forms.CharField(required=False, label="Ground-truth answer")
    tool_calls = forms.JSONField(
        required=False, widget=forms.Textarea(attrs=JSON_AREA), label="Ground-truth calls"
    )
    dataset = DatasetVersionChoice(required=False, label="Or ground truth from dataset")
    row_index = forms.IntegerField(min_value=0, initial=0, required=False, label="Row")
    tool_results = OptionalJSONField(
        required=False,
        widget=forms.Textarea(attrs=JSON_AREA),
        help_text='Results of the calls, e.g. [{"name": "calculator", "ok": true, "output": "4"}]',
    )
    step = forms.IntegerField(min_value=0, initial=0, help_text="Training step, for schedules.")
    total_steps = forms.IntegerField(min_value=1, required=False)

    def clean_tool_results(self):
        value = self.cleaned_data["tool_results"]
        if value in (None, ""):
            return None
        if not isinstance(value, list) or not all(isinstance(item, dict) for item in value):
            raise forms.ValidationError("Give a JSON list of objects with name, ok and output.")
        return value
