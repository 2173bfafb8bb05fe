"""Forms of the datasets app: what a user types; the services do the checking that needs the database."""

from django import forms

from workbench.catalog.selectors import latest_versions
from workbench.datasets.models import DatasetVersion, SplitMethod


class DatasetVersionChoice(forms.ModelChoiceField):
    """A dataset version select; use in a TeamScopedFormMixin form so it offers only the user's teams'."""

    def __init__(self, **kwargs):
        super().__init__(queryset=latest_versions(DatasetVersion), **kwargs)

    def label_from_instance(self, obj) -> str:
        return f"{obj.item.name} v{obj.number} ({obj.row_count} rows)"


class DatasetUploadForm(forms.Form):
    """A new version: the file (optional when editing, to re-split the latest file) and its split."""

    description = forms.CharField(widget=forms.Textarea(attrs={"rows": 3}), required=False)
    file = forms.FileField(required=False, help_text="JSONL, CSV or Parquet; one row per prompt.")
    split_method = forms.ChoiceField(choices=SplitMethod.choices, initial=SplitMethod.RATIO)
    eval_ratio = forms.FloatField(initial=0.1, min_value=0.0, max_value=0.99, label="Eval fraction")
    split_seed = forms.IntegerField(initial=0, label="Seed")
    split_column = forms.CharField(
        max_length=100, required=False, help_text="Cells: train or eval (test, val)."
    )
    note = forms.CharField(max_length=200, required=False, help_text="What changed in this version.")


class DatasetCreateForm(DatasetUploadForm):
    name = forms.CharField(max_length=100)
    field_order = ["name", "description", "file"]

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        self.fields["file"].required = True
