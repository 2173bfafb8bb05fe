"""The Evaluate form. Catalog choices are scoped by TeamScopedFormMixin; checkpoints to the team's runs."""

from __future__ import annotations

from typing import Any

from django import forms

from workbench.accounts.access import TeamScopedFormMixin
from workbench.datasets.models import DatasetKind, DatasetVersion
from workbench.prompts.models import PromptTemplateVersion
from workbench.rewards.models import RewardDefinitionVersion
from workbench.runs.config.bounds import OperatorBounds
from workbench.runs.models import Checkpoint
from workbench.runs.web.forms import VersionChoiceField, VersionMultipleChoiceField
from workbench.toolschemas.models import ToolSchemaVersion

from .models import ModelSource, Split
from .services import SAMPLES_MAX


def _versions(model):
    return (
        model.objects.select_related("item").filter(item__is_deleted=False).order_by("item__name", "-number")
    )


class CheckpointChoiceField(forms.ModelChoiceField):
    def label_from_instance(self, obj) -> str:
        return f"{obj.run.name} @ step {obj.step}"


class EvaluationForm(TeamScopedFormMixin, forms.Form):
    """What to evaluate (a model source), on what (a dataset version's split), and how (template, tools,
    reward, sampling, k). Template, tools and reward default to the checkpoint's run's, else the defaults."""

    name = forms.CharField(max_length=200, required=False, help_text="empty: named after model and data")
    source = forms.ChoiceField(choices=ModelSource.choices, initial=ModelSource.CHECKPOINT, label="Model")
    checkpoint = CheckpointChoiceField(
        queryset=Checkpoint.objects.none(),
        required=False,
        error_messages={"invalid_choice": "No such checkpoint among your team's runs."},
        help_text="a checkpoint of one of the team's runs",
    )
    model_path = forms.CharField(max_length=500, required=False, label="Model directory")
    dataset_version = VersionChoiceField(
        queryset=_versions(DatasetVersion).filter(item__kind=DatasetKind.PROMPTS), label="Dataset"
    )
    split = forms.ChoiceField(choices=Split.choices, initial=Split.EVAL)
    prompt_version = VersionChoiceField(
        queryset=_versions(PromptTemplateVersion), required=False, help_text="overrides the template"
    )
    reward_version = VersionChoiceField(
        queryset=_versions(RewardDefinitionVersion), required=False, help_text="overrides the reward"
    )
    tool_versions = VersionMultipleChoiceField(
        queryset=_versions(ToolSchemaVersion), required=False, help_text="overrides the tools"
    )
    samples = forms.IntegerField(
        min_value=1, max_value=SAMPLES_MAX, initial=4, label="k (samples per prompt)"
    )
    temperature = forms.FloatField(min_value=0.0, max_value=5.0, required=False, help_text="empty: the run's")
    max_problems = forms.IntegerField(min_value=1, required=False, help_text="empty: the whole split")
    max_turns = forms.IntegerField(min_value=1, max_value=64, required=False, help_text="empty: the run's")
    max_new_tokens_per_turn = forms.IntegerField(
        min_value=1, max_value=8192, required=False, help_text="empty: the run's"
    )
    seed = forms.IntegerField(min_value=0, initial=0)

    def __init__(self, *args, user, team, **kwargs) -> None:
        super().__init__(*args, user=user, team=team, **kwargs)
        checkpoints = Checkpoint.objects.select_related("run").filter(run__team=team)
        self.fields["checkpoint"].queryset = checkpoints.order_by("-run__created_at", "-step")
        bounds = OperatorBounds.from_settings().help_texts()
        self.fields["model_path"].help_text = bounds["model.path"].replace("'tiny' or a", "a")

    def clean(self) -> dict[str, Any]:
        data = super().clean()
        source = data.get("source")
        if (
            source == ModelSource.CHECKPOINT
            and not data.get("checkpoint")
            and "checkpoint" not in self.errors
        ):
            self.add_error("checkpoint", "Choose the checkpoint to evaluate.")
        if source == ModelSource.PATH and not data.get("model_path"):
            self.add_error("model_path", "Give the model directory to evaluate.")
        return data

    def service_kwargs(self) -> dict[str, Any]:
        data = self.cleaned_data
        source = data["source"]
        limits = {k: data[k] for k in ("max_turns", "max_new_tokens_per_turn") if data.get(k) is not None}
        return {
            "name": data["name"],
            "source": source,
            "checkpoint": data["checkpoint"] if source == ModelSource.CHECKPOINT else None,
            "model_path": data["model_path"] if source == ModelSource.PATH else "",
            "dataset_version": data["dataset_version"],
            "split": data["split"],
            "prompt_version": data["prompt_version"],
            "reward_version": data["reward_version"],
            "tool_versions": list(data["tool_versions"]),
            "samples": data["samples"],
            "temperature": data["temperature"],
            "max_problems": data["max_problems"],
            "limits": limits,
            "seed": data["seed"] or 0,
        }

    # service errors keyed by config path -> the field that shows them
    ERROR_FIELDS = {"model.path": "model_path", "model": "model_path"}

    def add_service_errors(self, errors: dict[str, list[str]]) -> None:
        for path, messages in errors.items():
            field = self.ERROR_FIELDS.get(path, path if path in self.fields else None)
            for message in messages:
                self.add_error(field, message if field else f"{path}: {message}")
