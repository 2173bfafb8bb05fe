"""Forms of the datasets app: what a user types; the services do the checking that needs the database."""

from django import forms

from workbench.catalog.selectors import latest_versions
from workbench.datasets.models import DatasetKind, DatasetVersion, SplitMethod


class DatasetVersionChoice(forms.ModelChoiceField):
    """A dataset version select; use in a TeamScopedFormMixin form so it offers only the user's teams'."""

    def __init__(self, **kwargs):
        # Choices need names and row counts only: statistics (a JSON document per version) stay unread.
        super().__init__(queryset=latest_versions(DatasetVersion).defer("statistics"), **kwargs)

    def label_from_instance(self, obj) -> str:
        return f"{obj.item.name} v{obj.number} ({obj.row_count} rows)"


class DatasetUploadForm(forms.Form):
    """A new version: the file (optional when editing, to re-split the latest file) and its split.

    The file comes last, so a browser sends every other field before it: an upload stopped at the size
    limit (`upload_error`, see upload_handler) still has them, and the form shows only the file's error."""

    description = forms.CharField(widget=forms.Textarea(attrs={"rows": 3}), required=False)
    split_method = forms.ChoiceField(choices=SplitMethod.choices, initial=SplitMethod.RATIO)
    eval_ratio = forms.FloatField(initial=0.1, min_value=0.0, max_value=0.99, label="Eval fraction")
    split_seed = forms.IntegerField(initial=0, label="Seed")
    split_column = forms.CharField(
        max_length=100, required=False, help_text="Cells: train or eval (test, val)."
    )
    note = forms.CharField(max_length=200, required=False, help_text="What changed in this version.")
    file = forms.FileField(required=False, help_text="JSONL, CSV or Parquet; one row per prompt.")

    def __init__(self, *args, upload_error: str | None = None, **kwargs):
        super().__init__(*args, **kwargs)
        self.upload_error = upload_error

    def clean_file(self):
        if self.upload_error:
            raise forms.ValidationError(self.upload_error)
        return self.cleaned_data.get("file")


class DatasetCreateForm(DatasetUploadForm):
    name = forms.CharField(max_length=100)
    kind = forms.ChoiceField(
        choices=DatasetKind.choices,
        initial=DatasetKind.PROMPTS,
        required=False,  # prompts when left out
        label="Rows are",
        help_text="Every version of the dataset holds this kind of row: runs pin prompts as RL data and"
        " conversations as SFT data.",
    )
    field_order = ["name", "kind", "description"]

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        self.fields["file"].required = self.upload_error is None  # else the refusal is the file's error
