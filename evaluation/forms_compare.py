"""Forms of the judge comparison pages: what to compare, the disagreement browser's filters,
a lead's send-back and adjudication actions, and calibration. They parse input; the
services apply the rules."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from django import forms
from django.http import QueryDict

from annotation.workflows.base import LabelField
from evaluation.compare.calibration import MAX_FOLDS, MIN_FOLDS, SplitPlan
from evaluation.compare.disagreements import DisagreementFilter
from evaluation.models import JudgeRun
from evaluation.services.calibration import CalibrationRequest
from evaluation.services.sendback import REASON_LIMIT

RESAMPLE_CHOICES = [(200, "200 (quicker)"), (1000, "1,000 (as compare_judges)")]
MAX_SEED = 2**31 - 1
STRATUM_LABELS = {"dataset": "Dataset", "split": "Split", "figure_type": "Figure type", "system": "System"}


def run_label(run: JudgeRun) -> str:
    config = f", configuration {run.config.name}" if run.config_id and run.config is not None else ""
    return f"#{run.pk} {run.judge} on {run.answers_system} ({run.get_status_display().lower()}{config})"


def field_choices(fields: Sequence[LabelField]) -> list[tuple[str, str]]:
    return [(label_field.name, f"{label_field.label} ({label_field.level})") for label_field in fields]


class CompareForm(forms.Form):
    """Which runs, which field, strata or not, how many resamples. Unbound (no query) it holds
    the defaults: every finished run, the first rating field, strata on."""

    judge_run = forms.TypedMultipleChoiceField(
        label="Judge runs", coerce=int, widget=forms.CheckboxSelectMultiple, required=True
    )
    field = forms.ChoiceField(label="Label field")
    strata = forms.BooleanField(label="Break down by dataset, split, figure type and system", required=False)
    resamples = forms.TypedChoiceField(label="Bootstrap resamples", coerce=int, choices=RESAMPLE_CHOICES)
    seed = forms.IntegerField(label="Seed", min_value=0, max_value=MAX_SEED, initial=0)

    def __init__(
        self,
        data: Mapping[str, Any] | None,
        *,
        runs: Sequence[JudgeRun],
        fields: Sequence[LabelField],
        default_resamples: int,
    ) -> None:
        finished = [run.pk for run in runs if run.status == "done"] or [run.pk for run in runs]
        initial = {
            "judge_run": finished,
            "field": fields[0].name if fields else "",
            "strata": True,
            "resamples": default_resamples,
            "seed": 0,
        }
        super().__init__(self._with_defaults(data, initial) if data else None, initial=initial)
        self._set_choices("judge_run", [(run.pk, run_label(run)) for run in runs])
        self._set_choices("field", field_choices(fields))

    @staticmethod
    def _with_defaults(data: Mapping[str, Any], initial: dict[str, Any]) -> QueryDict:
        """A query that names only some choices (a link with ``?judge_run=12``) keeps the
        defaults for the rest. An unticked box sends nothing, so "strata" is off only when the
        query comes from the form itself (which sends ``compared``)."""
        merged = QueryDict(mutable=True)
        merged.update(data)
        for name, value in initial.items():
            if name in merged or (name == "strata" and "compared" in merged):
                continue
            if isinstance(value, list):
                merged.setlist(name, [str(item) for item in value])
            elif isinstance(value, bool):
                if value:
                    merged[name] = "on"
            else:
                merged[name] = str(value)
        return merged

    def _set_choices(self, name: str, choices: list[tuple[Any, str]]) -> None:
        field = self.fields[name]
        assert isinstance(field, forms.ChoiceField)
        field.choices = choices

    def chosen(self) -> dict[str, Any]:
        """The choice in force: the form's when it is valid, else the defaults."""
        if self.is_bound and self.is_valid():
            return dict(self.cleaned_data)
        return dict(self.initial)


class DisagreementFilterForm(forms.Form):
    judge_run = forms.TypedChoiceField(label="Judge run", coerce=int)
    field = forms.ChoiceField(label="Label field")
    dataset = forms.ChoiceField(label="Dataset", required=False)
    split = forms.ChoiceField(label="Split", required=False)
    figure_type = forms.ChoiceField(label="Figure type", required=False)
    system = forms.ChoiceField(label="System", required=False)
    human_label = forms.TypedChoiceField(label="Reference label", coerce=float, required=False, empty_value=None)
    score_min = forms.FloatField(label="Judge score from", min_value=0, max_value=1, required=False)
    score_max = forms.FloatField(label="to", min_value=0, max_value=1, required=False)
    min_gap = forms.FloatField(label="Gap at least", min_value=0, max_value=1, required=False)

    def __init__(
        self,
        data: Mapping[str, Any] | None,
        *,
        runs: Sequence[JudgeRun],
        fields: Sequence[LabelField],
        strata: Mapping[str, Sequence[str]],
        scale: Sequence[float],
    ) -> None:
        super().__init__(data)
        self._set_choices("judge_run", [(run.pk, run_label(run)) for run in runs])
        self._set_choices("field", field_choices(fields))
        for dimension, label in STRATUM_LABELS.items():
            self._set_choices(dimension, [("", f"Every {label.lower()}"), *((v, v) for v in strata.get(dimension, ()))])
        self._set_choices("human_label", [("", "Any"), *((f"{point:g}", f"{point:g}") for point in scale)])

    def _set_choices(self, name: str, choices: list[tuple[Any, str]]) -> None:
        field = self.fields[name]
        assert isinstance(field, forms.ChoiceField)
        field.choices = choices

    def clean(self) -> dict[str, Any]:
        data = super().clean() or {}
        low, high = data.get("score_min"), data.get("score_max")
        if low is not None and high is not None and low > high:
            self.add_error("score_max", "The end of the range comes before its start.")
        return data

    def filters(self) -> DisagreementFilter:
        """The filter asked for; nothing filtered while the form has errors."""
        if not self.is_valid():
            return DisagreementFilter()
        data = self.cleaned_data
        return DisagreementFilter(
            strata={dimension: data[dimension] for dimension in STRATUM_LABELS if data.get(dimension)},
            human_label=data.get("human_label"),
            score_min=data.get("score_min"),
            score_max=data.get("score_max"),
            min_gap=data.get("min_gap"),
        )


class SendBackForm(forms.Form):
    seen_capacity = forms.IntegerField(required=False, min_value=0, widget=forms.HiddenInput)
    reason = forms.CharField(label="Why", required=False, max_length=REASON_LIMIT)


class AdjudicateForm(forms.Form):
    reason = forms.CharField(label="Why", required=False, max_length=REASON_LIMIT)


class CalibrationForm(forms.Form):
    kind = forms.ChoiceField(
        label="Calibrate",
        choices=[
            ("threshold", "A score threshold (continuous judges: L3Score, SciDQA)"),
            ("learned", "QAEval's learned fallback"),
        ],
        widget=forms.RadioSelect,
        initial="threshold",
    )
    judge_runs = forms.TypedMultipleChoiceField(
        label="On the scores of", coerce=int, widget=forms.CheckboxSelectMultiple
    )
    field = forms.ChoiceField(label="Against the label field")
    method = forms.ChoiceField(
        label="Split",
        choices=[("holdout", "Hold out a share of the items"), ("kfold", "k-fold cross-validation over items")],
        initial="holdout",
    )
    test_fraction = forms.FloatField(label="Share held out", min_value=0.05, max_value=0.95, initial=0.3)
    folds = forms.IntegerField(label="Folds", min_value=MIN_FOLDS, max_value=MAX_FOLDS, initial=5)
    seed = forms.IntegerField(label="Seed", min_value=0, max_value=MAX_SEED, initial=0)
    resamples = forms.TypedChoiceField(label="Bootstrap resamples", coerce=int, choices=RESAMPLE_CHOICES, initial=1000)
    name = forms.CharField(
        label="Save as", required=False, max_length=100, help_text="A name runs will know the configuration by."
    )

    def __init__(
        self, data: Mapping[str, Any] | None, *, runs: Sequence[JudgeRun], fields: Sequence[LabelField]
    ) -> None:
        super().__init__(data)
        judge_runs = self.fields["judge_runs"]
        assert isinstance(judge_runs, forms.ChoiceField)
        judge_runs.choices = [(run.pk, run_label(run)) for run in runs]
        field = self.fields["field"]
        assert isinstance(field, forms.ChoiceField)
        field.choices = field_choices(fields)

    def calibration_request(self) -> CalibrationRequest:
        data = self.cleaned_data
        plan = SplitPlan(
            method=data["method"], folds=data["folds"], test_fraction=data["test_fraction"], seed=data["seed"]
        )
        return CalibrationRequest(kind=data["kind"], plan=plan, field=data["field"], resamples=data["resamples"])
