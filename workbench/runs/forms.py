"""Forms of the runs pages. Catalog choices are scoped to the user's team by TeamScopedFormMixin."""

from __future__ import annotations

from typing import Any

from django import forms

from trainers.workbench_api import PRESETS
from workbench.accounts.access import TeamScopedFormMixin
from workbench.datasets.models import DatasetVersion
from workbench.jobs.queues import QUEUE_NAMES
from workbench.prompts.models import PromptTemplateVersion
from workbench.rewards.models import RewardDefinitionVersion
from workbench.toolschemas.models import ToolSchemaVersion

from .config_form import field_for_error, flatten, schema_fields, unflatten
from .selectors import SORTS, TrajectoryFilters


def _version_label(version) -> str:
    return f"{version.item.name} v{version.number}"


class VersionChoiceField(forms.ModelChoiceField):
    def label_from_instance(self, obj) -> str:
        return _version_label(obj)


class VersionMultipleChoiceField(forms.ModelMultipleChoiceField):
    def label_from_instance(self, obj) -> str:
        return _version_label(obj)


def _versions(model):
    return (
        model.objects.select_related("item").filter(item__is_deleted=False).order_by("item__name", "-number")
    )


class RunForm(TeamScopedFormMixin, forms.Form):
    """Run identity, catalog pins and one field per config leaf (named by its dotted config path)."""

    name = forms.CharField(max_length=200)
    queue = forms.ChoiceField(choices=[(q, q) for q in QUEUE_NAMES], initial="cpu")
    notes = forms.CharField(required=False, widget=forms.Textarea(attrs={"rows": 2}))
    tags = forms.CharField(required=False, help_text="comma-separated")
    dataset_version = VersionChoiceField(queryset=_versions(DatasetVersion), required=False)
    prompt_version = VersionChoiceField(
        queryset=_versions(PromptTemplateVersion), required=False, help_text="overrides template.*"
    )
    reward_version = VersionChoiceField(
        queryset=_versions(RewardDefinitionVersion), required=False, help_text="overrides reward.*"
    )
    tool_versions = VersionMultipleChoiceField(
        queryset=_versions(ToolSchemaVersion), required=False, help_text="overrides tools"
    )

    IDENTITY = ("name", "queue", "notes", "tags")
    PINS = ("dataset_version", "prompt_version", "reward_version", "tool_versions")

    def __init__(self, *args, config: dict[str, Any] | None = None, **kwargs) -> None:
        super().__init__(*args, **kwargs)
        self.config_fields = schema_fields()
        for path, field in self.config_fields.items():
            self.fields[path] = field
        if config is not None:
            self.initial.update({k: v for k, v in flatten(config, list(self.config_fields)).items()})

    def identity_fields(self) -> list:
        return [self[name] for name in self.IDENTITY]

    def pin_fields(self) -> list:
        return [self[name] for name in self.PINS]

    def config_sections(self) -> list[tuple[str, list]]:
        """Bound config fields grouped by their top-level section, for one fieldset each."""
        sections: dict[str, list] = {}
        for path in self.config_fields:
            sections.setdefault(path.split(".")[0], []).append(self[path])
        return list(sections.items())

    def config(self) -> dict[str, Any]:
        return unflatten({path: self.cleaned_data.get(path) for path in self.config_fields})

    def service_kwargs(self) -> dict[str, Any]:
        data = self.cleaned_data
        return {
            "name": data["name"],
            "queue": data["queue"],
            "notes": data["notes"],
            "tags": data["tags"].split(","),
            "config": self.config(),
            **{pin: data[pin] for pin in self.PINS},
        }

    def add_service_errors(self, errors: dict[str, list[str]]) -> None:
        """Put each error from validation of the config on the field of its key path."""
        for path, messages in errors.items():
            target = path if path in self.IDENTITY else field_for_error(path, set(self.config_fields))
            for message in messages:
                self.add_error(target, f"{path}: {message}" if target and target != path else message)


def preset_choices() -> list[tuple[str, str]]:
    return [(name, preset.title) for name, preset in PRESETS.items()]


class RunMetaForm(forms.Form):
    name = forms.CharField(max_length=200)
    notes = forms.CharField(required=False, widget=forms.Textarea(attrs={"rows": 3}))
    tags = forms.CharField(required=False, help_text="comma-separated")
    is_baseline = forms.BooleanField(required=False, label="baseline (marked on compare charts)")


class TrajectoryFilterForm(forms.Form):
    """The inspector's GET filters."""

    TRISTATE = [("", "any"), ("yes", "yes"), ("no", "no")]
    step = forms.IntegerField(required=False, min_value=0)
    reward_min = forms.FloatField(required=False)
    reward_max = forms.FloatField(required=False)
    correct = forms.ChoiceField(choices=TRISTATE, required=False)
    tool = forms.CharField(required=False, max_length=64)
    failed_call = forms.ChoiceField(choices=TRISTATE, required=False)
    turns_min = forms.IntegerField(required=False, min_value=0)
    turns_max = forms.IntegerField(required=False, min_value=0)
    length_min = forms.IntegerField(required=False, min_value=0)
    length_max = forms.IntegerField(required=False, min_value=0)
    group = forms.CharField(required=False, max_length=160)
    sort = forms.ChoiceField(
        choices=[(f"{d}{k}", f"{k} {'desc' if d else 'asc'}") for k in SORTS for d in ("-", "")],
        required=False,
    )
    cursor = forms.CharField(required=False, max_length=200)

    def filters(self) -> TrajectoryFilters:
        data = self.cleaned_data
        tristate = {"yes": True, "no": False, "": None}
        values = {name: data.get(name) for name in TrajectoryFilters.__dataclass_fields__}
        values["correct"] = tristate[data.get("correct") or ""]
        values["failed_call"] = tristate[data.get("failed_call") or ""]
        values["tool"], values["group"] = data.get("tool") or "", data.get("group") or ""
        return TrajectoryFilters(**values)
