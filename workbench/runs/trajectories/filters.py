"""The trajectory inspector's filters and sorts, which the runs' and the evaluations' inspectors share: the
GET form, the filters it yields as a query, and the columns a list may be sorted by."""

from __future__ import annotations

from dataclasses import dataclass

from django import forms
from django.db.models import Q


@dataclass(frozen=True)
class TrajectoryFilters:
    """The inspector's filters; None means "any"."""

    step: int | None = None
    reward_min: float | None = None
    reward_max: float | None = None
    correct: bool | None = None
    tool: str = ""
    failed_call: bool | None = None
    turns_min: int | None = None
    turns_max: int | None = None
    length_min: int | None = None
    length_max: int | None = None
    group: str = ""

    def as_q(self) -> Q:
        bounds = {
            "step": self.step,
            "reward__gte": self.reward_min,
            "reward__lte": self.reward_max,
            "correct": self.correct,
            "num_turns__gte": self.turns_min,
            "num_turns__lte": self.turns_max,
            "length__gte": self.length_min,
            "length__lte": self.length_max,
            "group_id": self.group or None,
            "tool_counts__has_key": self.tool or None,
        }
        q = Q(**{lookup: value for lookup, value in bounds.items() if value is not None})
        if self.failed_call is not None:
            q &= Q(num_failed_calls__gt=0) if self.failed_call else Q(num_failed_calls=0)
        return q


# Sort name -> column; each has an index (run, column, id) for keyset pages over a whole run.
SORTS = {
    "reward": "reward",
    "length": "length",
    "turns": "num_turns",
    "tool_calls": "num_tool_calls",
    "step": "step",
}


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
