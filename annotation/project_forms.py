"""Forms of the project pages. They parse and check input; the services in
``annotation.services.projects`` and ``accounts.services`` apply the rules."""

from __future__ import annotations

import json
import re
from typing import Any

from django import forms
from django.core.exceptions import ValidationError
from django.db.models import QuerySet
from django.forms import BoundField

from accounts.models import User
from annotation.access import datasets_importable_by
from annotation.models import (
    MAX_LEASE_SECONDS,
    MAX_OVERLAP,
    MIN_LEASE_SECONDS,
    AssignmentMode,
    Dataset,
    Project,
    QAItem,
    Role,
)
from annotation.services.projects import GUIDELINE_LIMIT, ProjectSettings, Selection
from annotation.workflows import workflow_choices
from annotation.workflows.rubric_presets import PRESETS

# SPIQA's figure-type vocabulary, which the importers normalise figure types to.
FIGURE_TYPE_CHOICES = [
    ("plot", "Plot"),
    ("schematic", "Schematic"),
    ("photograph(s)", "Photograph(s)"),
    ("table", "Table"),
    ("other", "Other"),
]
MAX_IDS = 10_000
MAX_CALIBRATION = 100_000
ID_SEPARATORS = re.compile(r"[\s,]+")


def parse_ids(text: str) -> list[str]:
    """External ids from a textarea: one per line or separated by commas, duplicates dropped."""
    return list(dict.fromkeys(value for value in ID_SEPARATORS.split(text) if value))


class IdListField(forms.CharField):
    """A textarea of external ids, cleaned to a list."""

    widget = forms.Textarea(attrs={"rows": 3})

    def __init__(self, **kwargs: Any) -> None:
        kwargs.setdefault("required", False)
        super().__init__(**kwargs)

    def to_python(self, value: Any) -> list[str]:  # type: ignore[override]
        ids = parse_ids(str(value or ""))
        if len(ids) > MAX_IDS:
            raise ValidationError(f"At most {MAX_IDS:,} ids at once.")
        return ids


class JsonObjectField(forms.CharField):
    """A textarea holding one JSON object, cleaned to a dict; errors say where the JSON breaks."""

    widget = forms.Textarea(attrs={"rows": 12, "spellcheck": "false"})

    def to_python(self, value: Any) -> dict[str, Any] | None:  # type: ignore[override]
        text = str(value or "").strip()
        if not text:
            return None
        try:
            parsed = json.loads(text)
        except json.JSONDecodeError as error:
            raise ValidationError(f"Not valid JSON: {error.msg} (line {error.lineno}, column {error.colno}).") from None
        if not isinstance(parsed, dict):
            raise ValidationError('Give one JSON object: {"name": ..., "criteria": [...]}.')
        return parsed


# Rubric rating is the one workflow configured per project: its block of the form.
RUBRIC_WORKFLOW = "rubric_rating"
RUBRIC_FIELDS = ("rubric_preset", "workflow_config")


class ProjectCreateForm(forms.Form):
    name = forms.CharField(max_length=200)
    dataset = forms.ModelChoiceField(queryset=Dataset.objects.none(), help_text="Datasets you may build projects on.")
    workflow = forms.ChoiceField(choices=())
    overlap = forms.IntegerField(
        min_value=1, max_value=MAX_OVERLAP, initial=1, help_text=f"Annotators per item, 1 to {MAX_OVERLAP}."
    )
    lease_minutes = forms.IntegerField(
        min_value=MIN_LEASE_SECONDS // 60,
        max_value=MAX_LEASE_SECONDS // 60,
        initial=30,
        label="Lease (minutes)",
        help_text="How long a claimed item stays reserved for its annotator.",
    )
    assignment_mode = forms.ChoiceField(
        choices=[("", "The workflow's default"), *AssignmentMode.choices], required=False
    )
    calibration_size = forms.IntegerField(
        min_value=0,
        max_value=MAX_CALIBRATION,
        initial=0,
        label="Calibration set",
        help_text="The first this many items go to every annotator, for agreement. 0 for none.",
    )
    split = forms.CharField(
        max_length=100,
        required=False,
        help_text="Only items of this split. Empty for every split.",
        widget=forms.TextInput(attrs={"list": "split-names"}),
    )
    paper_ids = IdListField(
        label="Paper ids", help_text="Only items of these papers: one id per line or comma separated."
    )
    figure_types = forms.MultipleChoiceField(
        choices=FIGURE_TYPE_CHOICES,
        required=False,
        widget=forms.CheckboxSelectMultiple,
        help_text="Only items whose evidence includes a figure of these types.",
    )
    sample_size = forms.IntegerField(
        min_value=1, required=False, label="Sample size", help_text="A random sample of this many selected items."
    )
    seed = forms.IntegerField(
        min_value=0, max_value=2**31 - 1, initial=0, required=False, help_text="The same seed gives the same sample."
    )
    guidelines = forms.CharField(
        widget=forms.Textarea(attrs={"rows": 10}),
        required=False,
        max_length=GUIDELINE_LIMIT,
        help_text="Markdown. Empty for the workflow's default guidelines.",
    )
    rubric_preset = forms.ChoiceField(
        choices=[("", "—"), *((name, preset.label) for name, preset in PRESETS.items())],
        required=False,
        label="Rubric preset",
        help_text="Rubric rating only: a rubric from the source papers.",
    )
    workflow_config = JsonObjectField(
        required=False,
        label="Your own rubric (JSON)",
        help_text="Rubric rating only, instead of a preset: criteria with their scales. Start from a preset below.",
    )

    def __init__(self, *args: Any, user: User, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        datasets: QuerySet[Dataset] = datasets_importable_by(user).order_by("name")
        self.datasets = datasets
        self.fields["dataset"].queryset = datasets  # type: ignore[attr-defined]
        self.fields["workflow"].choices = workflow_choices()  # type: ignore[attr-defined]

    def split_names(self) -> list[str]:
        """Split names of the datasets on offer, for the split field's suggestions."""
        return list(
            QAItem.objects.filter(dataset__in=self.datasets.values("pk"))
            .order_by("split")
            .values_list("split", flat=True)
            .distinct()
        )

    def clean(self) -> dict[str, Any]:
        cleaned = super().clean() or {}
        dataset, split = cleaned.get("dataset"), cleaned.get("split")
        if dataset is not None and split and not QAItem.objects.filter(dataset=dataset, split=split).exists():
            self.add_error("split", f"{dataset.name} has no split called {split!r}.")
        self._clean_rubric(cleaned)
        return cleaned

    def _clean_rubric(self, cleaned: dict[str, Any]) -> None:
        preset, rubric = cleaned.get("rubric_preset"), cleaned.get("workflow_config")
        if cleaned.get("workflow") != RUBRIC_WORKFLOW:
            if preset or rubric:
                self.add_error("rubric_preset" if preset else "workflow_config", "Only rubric rating takes a rubric.")
        elif preset and rubric:
            self.add_error("workflow_config", "Choose a preset or give your own rubric, not both.")
        elif not preset and not rubric and "workflow_config" not in self.errors:
            self.add_error("rubric_preset", "Rubric rating needs a rubric: choose a preset or give your own.")

    def general_fields(self) -> list[BoundField]:
        return [self[name] for name in self.fields if name not in RUBRIC_FIELDS]

    def rubric_fields(self) -> list[BoundField]:
        return [self[name] for name in RUBRIC_FIELDS]

    def rubric_presets(self) -> list[tuple[str, str, str]]:
        """Each preset as (name, label, JSON), to copy into the rubric box and edit."""
        return [(name, preset.label, json.dumps(preset.config, indent=2)) for name, preset in PRESETS.items()]

    def selection(self) -> Selection:
        data = self.cleaned_data
        return Selection(
            split=data["split"],
            paper_ids=tuple(data["paper_ids"]),
            figure_types=tuple(data["figure_types"]),
            sample_size=data["sample_size"],
            seed=data["seed"] or 0,
        )

    def settings(self) -> ProjectSettings:
        data = self.cleaned_data
        preset = data["rubric_preset"]
        # Left empty, the service picks the workflow's default mode.
        return ProjectSettings(
            overlap=data["overlap"],
            lease_seconds=data["lease_minutes"] * 60,
            assignment_mode=data["assignment_mode"],
            calibration_size=data["calibration_size"],
            workflow_config={"preset": preset} if preset else data["workflow_config"] or {},
        )


class GuidelineForm(forms.Form):
    body = forms.CharField(
        widget=forms.Textarea(attrs={"rows": 16}),
        max_length=GUIDELINE_LIMIT,
        label="Guidelines",
        help_text="Markdown. Publishing makes this the version every new annotation records.",
    )
    note = forms.CharField(max_length=300, required=False, help_text="What changed in this version.")


class MemberInviteForm(forms.Form):
    email = forms.EmailField(
        help_text="The person signs in with this address; new people get an email to set a password."
    )
    role = forms.ChoiceField(choices=Role.choices, initial=Role.ANNOTATOR)


class AssignmentForm(forms.Form):
    annotator = forms.ModelChoiceField(queryset=User.objects.none())
    paper_ids = IdListField(
        label="Paper ids", help_text="All items of these papers: one id per line or comma separated."
    )
    item_ids = IdListField(label="Item ids", help_text="These items, by their external id.")

    def __init__(self, *args: Any, project: Project, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        members = User.objects.filter(memberships__project=project).order_by("email")
        self.fields["annotator"].queryset = members  # type: ignore[attr-defined]

    def clean(self) -> dict[str, Any]:
        cleaned = super().clean() or {}
        if not self.errors and not cleaned.get("paper_ids") and not cleaned.get("item_ids"):
            raise ValidationError("Give paper ids, item ids or both.")
        return cleaned
