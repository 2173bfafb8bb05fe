"""Forms of the runs pages. Catalog choices are scoped to the user's team by TeamScopedFormMixin."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from django import forms
from django.core.exceptions import ValidationError
from django.forms import BoundField
from django.http import QueryDict

from trainers.workbench_api import RunConfig
from workbench.accounts.access import TeamScopedFormMixin
from workbench.agents.models import AgentProgramVersion
from workbench.datasets.models import DatasetKind, DatasetVersion
from workbench.jobs.queues import QUEUE_NAMES
from workbench.prompts.models import PromptTemplateVersion
from workbench.rewards.models import RewardDefinitionVersion
from workbench.toolschemas.models import ToolSchemaVersion

from ..config.bounds import OperatorBounds
from .config_form import changed_summary, field_for_error, flatten, schema_fields, unflatten
from .config_yaml import YAMLConfigError, config_from_yaml, config_to_yaml, posted_values


def _version_label(version) -> str:
    return f"{version.item.name} v{version.number}"


def _at(config: dict[str, Any], path: str) -> Any:
    """The value at a dotted path of a config; None where a part is missing."""
    node: Any = config
    for part in path.split("."):
        node = node.get(part) if isinstance(node, dict) else None
    return node


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


@dataclass(frozen=True)
class Section:
    """One collapsed part of the new-run form: its fields and a summary of their non-default values."""

    name: str
    fields: list[BoundField]
    summary: str

    @property
    def has_errors(self) -> bool:
        return any(field.errors for field in self.fields)


class RunForm(TeamScopedFormMixin, forms.Form):
    """Run identity, catalog pins and one field per config leaf (named by its dotted config path).

    The page leads with what people change (LEAD, the pins); each other config section is collapsed with
    a summary of its non-default values. A config pasted as YAML replaces the posted config values.
    """

    name = forms.CharField(max_length=200, label="Name")
    queue = forms.ChoiceField(choices=[(q, q) for q in QUEUE_NAMES], initial="cpu", label="Queue")
    notes = forms.CharField(required=False, widget=forms.Textarea(attrs={"rows": 2}))
    tags = forms.CharField(required=False, help_text="comma-separated")
    dataset_version = VersionChoiceField(
        queryset=_versions(DatasetVersion).filter(item__kind=DatasetKind.PROMPTS),
        required=False,
        help_text="the prompts RL trains on",
    )
    sft_dataset_version = VersionChoiceField(
        queryset=_versions(DatasetVersion).filter(item__kind=DatasetKind.CONVERSATIONS),
        required=False,
        label="SFT data",
        help_text="expert conversations for the sft section (its data_path)",
    )
    prompt_version = VersionChoiceField(
        queryset=_versions(PromptTemplateVersion), required=False, help_text="overrides template.*"
    )
    reward_version = VersionChoiceField(
        queryset=_versions(RewardDefinitionVersion), required=False, help_text="overrides reward.*"
    )
    tool_versions = VersionMultipleChoiceField(
        queryset=_versions(ToolSchemaVersion), required=False, help_text="overrides tools"
    )
    agent_version = VersionChoiceField(
        queryset=_versions(AgentProgramVersion),
        required=False,
        label="Agent program",
        help_text="plays each episode (rollout.backend agent, template qwen_tool or hf_native, no tools):"
        " its source goes into rollout.agent.source",
    )
    agent_wall_s = forms.FloatField(
        required=False,
        min_value=0.001,
        label="Agent wall_s (rollout.agent.wall_s)",
        help_text="an episode's wall-clock limit in seconds; blank: rollout.agent's own (120 by default)",
    )
    config_yaml = forms.CharField(
        required=False,
        label="config as YAML",
        help_text="Paste a whole config, as python -m trainers train reads it: it replaces the values above"
        " (keys left out take their defaults).",
        widget=forms.Textarea(attrs={"rows": 8, "class": "json", "spellcheck": "false"}),
    )

    LEAD = (
        "name", "model.path", "training.steps", "optimizer.lr", "rollout.samples_per_prompt", "queue",
        "resources.gpus",
    )  # fmt: skip
    LEAD_LABELS = {
        "model.path": "Model",
        "training.steps": "Steps",
        "optimizer.lr": "Learning rate",
        "rollout.samples_per_prompt": "Group size",
        "resources.gpus": "GPUs",
    }
    DESCRIPTION = ("notes", "tags")
    IDENTITY = ("name", "queue", *DESCRIPTION)
    PINS = (
        "dataset_version", "sft_dataset_version", "prompt_version", "reward_version", "tool_versions",
        "agent_version",
    )  # fmt: skip
    # Form fields for one config value each, set beside the pins (the value's path -> the field)
    PIN_VALUES = {"rollout.agent.wall_s": "agent_wall_s"}

    def __init__(self, data=None, *args, config: dict[str, Any] | None = None, **kwargs) -> None:
        self.config_fields = schema_fields()
        self.yaml_errors: list[str] = []
        self.applies_yaml = data is not None and "apply_yaml" in data
        if data is not None and (data.get("config_yaml") or "").strip():
            data = self._with_yaml(data)
        super().__init__(data, *args, **kwargs)
        for path, field in self.config_fields.items():
            self.fields[path] = field
        for path, label in self.LEAD_LABELS.items():
            self.fields[path].label = f"{label} ({path})"
        bounds = OperatorBounds.from_settings()
        for path, text in bounds.help_texts().items():
            self.fields[path].help_text = f"{self.fields[path].help_text}. {text}".lstrip(". ")
        wall_s = f"Operator bound: ≤ {bounds.agent_maxima['wall_s']:g} (WORKBENCH_AGENT_MAX_WALL_S)"
        self.fields["agent_wall_s"].help_text += f". {wall_s}"
        if config is not None:
            self.initial.update(flatten(config, self.config_fields))
            self.initial["agent_wall_s"] = _at(config, "rollout.agent.wall_s")

    def _with_yaml(self, data: QueryDict) -> QueryDict:
        """The posted data with every config value (and the name, if given) taken from the pasted YAML."""
        try:
            config = config_from_yaml(data["config_yaml"])
        except YAMLConfigError as exc:
            self.yaml_errors = exc.messages
            return data
        values = data.copy()
        for path in self.config_fields:
            values.pop(path, None)
        for path, value in posted_values(config, self.config_fields).items():
            values[path] = value
        if "name" in config:
            values["name"] = config["name"]
        values["config_yaml"] = ""
        return values

    def clean(self) -> dict[str, Any]:
        for message in self.yaml_errors:
            self.add_error("config_yaml", message)
        return super().clean()

    def lead_fields(self) -> list[BoundField]:
        return [self[name] for name in self.LEAD]

    def pin_fields(self) -> list[BoundField]:
        return [self[name] for name in (*self.PINS, *self.PIN_VALUES.values())]

    def current_values(self) -> dict[str, Any]:
        """Each config field's value: as posted where it is valid (a blank is None, as in the config it
        launches), else as the form started."""
        if not self.is_bound:
            return {path: self.initial.get(path) for path in self.config_fields}
        values = {}
        for path, field in self.config_fields.items():
            try:
                value = field.clean(self[path].data)
                values[path] = None if value == "" else value
            except ValidationError:
                values[path] = self.initial.get(path)
        return values

    def sections(self) -> list[Section]:
        """The collapsed config sections (fields outside LEAD, by top-level key), then notes and tags."""
        values = self.current_values()
        defaults = flatten(RunConfig().model_dump(mode="json"), self.config_fields)
        paths: dict[str, list[str]] = {}
        for path in self.config_fields:
            if path not in self.LEAD:
                paths.setdefault(path.split(".")[0], []).append(path)
        sections = [
            Section(
                name=name,
                fields=[self[path] for path in members],
                summary=changed_summary({p: values[p] for p in members}, defaults),
            )
            for name, members in paths.items()
        ]
        described = {name: self[name].value() or "" for name in self.DESCRIPTION}
        description = changed_summary(described, dict.fromkeys(self.DESCRIPTION, ""))
        return [*sections, Section("notes and tags", [self[n] for n in self.DESCRIPTION], description)]

    def config_yaml_out(self) -> str:
        """The config the form holds now, as YAML for `python -m trainers train` (and to paste back)."""
        name = (self["name"].value() or "").strip()
        config = unflatten(self.current_values())
        return config_to_yaml({"name": name, **config} if name else config)

    def checked_kwargs(self) -> dict[str, Any]:
        """The queue, config and pins run_create checks, from the fields the form's own checks passed: a
        field they refused is left out (its default stands in), so one submit finds every error."""
        data = self.cleaned_data
        config = unflatten({path: data[path] for path in self.config_fields if path in data})
        if data.get("agent_wall_s") is not None:
            rollout = config.setdefault("rollout", {})
            rollout["agent"] = {**(rollout.get("agent") or {}), "wall_s": data["agent_wall_s"]}
        pins = {pin: data[pin] for pin in self.PINS if pin in data}
        return {"queue": data.get("queue", ""), "config": config, **pins}

    def service_kwargs(self) -> dict[str, Any]:
        data = self.cleaned_data
        return {
            "name": data["name"],
            "notes": data["notes"],
            "tags": data["tags"].split(","),
            **self.checked_kwargs(),
        }

    def add_service_errors(self, errors: dict[str, list[str]]) -> None:
        """Put each error from validation of the config on the field of its key path (or its pin); a field
        the form's own checks refused keeps just their error (the service checked its default)."""
        refused = set(self.errors)
        for path, messages in errors.items():
            own = path in self.IDENTITY or path in self.PINS
            target = path if own else field_for_error(path, set(self.config_fields))
            if path in self.PIN_VALUES and self[self.PIN_VALUES[path]].value() not in (None, ""):
                target = self.PIN_VALUES[path]
            if target in refused:
                continue
            for message in messages:
                self.add_error(target, f"{path}: {message}" if target and target != path else message)


class RunMetaForm(forms.Form):
    name = forms.CharField(max_length=200)
    notes = forms.CharField(required=False, widget=forms.Textarea(attrs={"rows": 3}))
    tags = forms.CharField(required=False, help_text="comma-separated")
    is_baseline = forms.BooleanField(required=False, label="baseline (marked on compare charts)")
