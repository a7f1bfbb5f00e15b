"""The form of ``rubric_rating``: one field per criterion of the project's rubric (per cited
image for a repeated rubric), up to the stage revealed so far, and the record of reveals.

See ``rubric_rating.py`` for the units, the stages and the keyboard.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from decimal import Decimal, InvalidOperation
from typing import Any

from django import forms
from django.core.exceptions import ValidationError
from django.utils.html import format_html
from django.utils.safestring import SafeString

from annotation.models import Project
from annotation.workflows.base import ItemView, Payload, WorkflowForm
from annotation.workflows.rubrics import Criterion, Option, Rubric, Scale, number, rubric_parse, value_text

REVEALS = "reveals"
# How the display names a part of the context that a later stage reveals.
PART_LABELS = {
    "paper": "the paper",
    "question": "the question",
    "gold_answer": "the gold answer",
    "explanation": "the explanation",
    "answers": "the answers",
    "figure": "the figures and tables",
    "caption": "the captions",
}
DAMAGED_REVEALS = (
    "The record of your answers from before the reveal is damaged. Reload the item: your answers are kept as a draft."
)


@dataclass(frozen=True, slots=True)
class Slot:
    """One answer the form asks for: a criterion, or a criterion for one cited image."""

    name: str  # the form field and, for whole-unit criteria, the payload key
    criterion: Criterion
    tag: str = ""  # the cited image, for repeated criteria


def rubric_for(project: Project) -> Rubric:
    return rubric_parse(project.workflow_config)


def slots_for(rubric: Rubric, tags: Sequence[str]) -> list[Slot]:
    if not rubric.repeat:
        return [Slot(criterion.key, criterion) for criterion in rubric.criteria]
    return [
        Slot(f"{criterion.key}__{index}", criterion, tag)
        for index, tag in enumerate(tags, 1)
        for criterion in rubric.criteria
    ]


# Form fields ------------------------------------------------------------------------------


def _decimal(value: Any) -> Decimal | None:
    if isinstance(value, bool):
        return None
    try:
        result = Decimal(str(value).strip())
    except InvalidOperation:
        return None
    return result if result.is_finite() else None


def form_text(value: Any) -> str:
    """A payload value as the form holds it: "" for nothing, "7" for 7 or 7.0."""
    if value is None:
        return ""
    if isinstance(value, bool):
        return str(value).lower()
    if isinstance(value, int | float):
        return value_text(value)
    return value if isinstance(value, str) else json.dumps(value)


def option_keys(options: Sequence[Option]) -> list[str]:
    """Each option's number key: the value itself on a scale of single-digit whole numbers
    (0/1, 1-5), else the position, 1 to 9 then 0 for the tenth."""
    texts = [value_text(option.value) for option in options]
    if all(len(text) == 1 and text.isdigit() for text in texts):
        return texts
    return [str(position % 10) for position in range(1, len(options) + 1)]


def option_label(option: Option, key: str, scale: Scale) -> SafeString:
    value = value_text(option.value) if scale.numeric else ""
    return format_html(
        '<span class="rubric-option"><span class="rubric-option-head"><kbd>{}</kbd>{}{}</span>{}</span>',
        key,
        format_html(' <strong class="rubric-option-value">{}</strong>', value) if value else "",
        format_html(' <span class="rubric-option-label">{}</span>', option.label) if option.label else "",
        format_html('<span class="rubric-option-description">{}</span>', option.description)
        if option.description
        else "",
    )


class RubricRadioSelect(forms.RadioSelect):
    """One radio button per option, each carrying its number key for the rubric script."""

    def __init__(self, *, keys: dict[str, str], attrs: dict[str, Any] | None = None) -> None:
        self.option_keys = keys
        super().__init__(attrs=attrs)

    def create_option(  # type: ignore[no-untyped-def]
        self, name, value, label, selected, index, subindex=None, attrs=None
    ) -> dict[str, Any]:
        option: dict[str, Any] = super().create_option(
            name, value, label, selected, index, subindex=subindex, attrs=attrs
        )
        key = self.option_keys.get(str(value))
        if key:
            option["attrs"] = {**option["attrs"], "data-rubric-key": key}
        return option


class ScaleChoiceField(forms.ChoiceField):
    """An option of a points, choices or short range scale, given as the form's text or as a
    JSON number; ``canonical`` gives the scale's value back."""

    def __init__(self, *, values: dict[str, Any], numeric: bool, **kwargs: Any) -> None:
        self.values = values
        self.numeric = numeric
        super().__init__(**kwargs)

    def to_python(self, value: Any) -> str:
        if value in self.empty_values:
            return ""
        if self.numeric:
            parsed = _decimal(value)
            if parsed is not None:
                return value_text(number(parsed))
        return str(value).strip()

    def canonical(self, cleaned: str) -> Any:
        return self.values[cleaned] if cleaned else None


class RangeField(forms.DecimalField):
    """A number range with many steps, typed into a number box."""

    def __init__(self, *, scale: Scale, **kwargs: Any) -> None:
        assert scale.minimum is not None
        assert scale.maximum is not None
        self.scale = scale
        super().__init__(min_value=scale.minimum, max_value=scale.maximum, **kwargs)

    def validate(self, value: Any) -> None:
        super().validate(value)
        scale = self.scale
        assert scale.minimum is not None
        assert scale.step is not None
        if value is not None and (value - scale.minimum) % scale.step != 0:
            first, step = number(scale.minimum), number(scale.step)
            raise ValidationError(f"Use steps of {step} from {first}: {first}, {number(scale.minimum + scale.step)}, …")

    def canonical(self, cleaned: Decimal | None) -> Any:
        return None if cleaned is None else number(cleaned)


class RubricTextField(forms.CharField):
    def canonical(self, cleaned: str) -> Any:
        return cleaned.strip()


def slot_field(slot: Slot, rubric: Rubric) -> forms.Field:
    criterion, scale = slot.criterion, slot.criterion.scale
    label = f"{slot.tag} · {criterion.label}" if slot.tag else criterion.label
    help_text = criterion.description
    if rubric.stage_count > 1:
        stage = rubric.stages[criterion.stage - 1]
        help_text = f"{stage.title}. {help_text}".strip()
    attrs = {"data-rubric-criterion": slot.name}
    common: dict[str, Any] = {"label": label, "required": criterion.required, "help_text": help_text}
    if scale.as_buttons:
        keys = option_keys(scale.options)
        texts = [value_text(option.value) for option in scale.options]
        allowed = ", ".join(texts)
        # Options without descriptions sit in one row; the class lands on the group's container.
        compact = not any(option.description for option in scale.options)
        attrs = {**attrs, "class": "rubric-scale rubric-scale--compact" if compact else "rubric-scale"}
        return ScaleChoiceField(
            values={text: option.value for text, option in zip(texts, scale.options, strict=True)},
            numeric=scale.numeric,
            choices=[(text, option_label(o, k, scale)) for text, o, k in zip(texts, scale.options, keys, strict=True)],
            widget=RubricRadioSelect(keys=dict(zip(texts, keys, strict=True)), attrs=attrs),
            error_messages={"required": "Rate this criterion.", "invalid_choice": f"Choose one of {allowed}."},
            **common,
        )
    if scale.type == "range":
        assert scale.minimum is not None
        assert scale.maximum is not None
        assert scale.step is not None
        box = {**attrs, "min": value_text(number(scale.minimum)), "max": value_text(number(scale.maximum))}
        box["step"] = value_text(number(scale.step))
        return RangeField(
            scale=scale,
            widget=forms.NumberInput(attrs=box),
            error_messages={"required": "Rate this criterion."},
            **common,
        )
    return RubricTextField(
        max_length=scale.max_length,
        widget=forms.Textarea(attrs={**attrs, "rows": 3}),
        error_messages={"required": "Write your answer."},
        **common,
    )


def canonical(field: forms.Field, cleaned: Any) -> Any:
    assert isinstance(field, ScaleChoiceField | RangeField | RubricTextField)
    return field.canonical(cleaned)


def answered(slot: Slot, rubric: Rubric, text: str) -> tuple[bool, Any]:
    """Whether the form text is a valid answer, and the answer."""
    field = slot_field(slot, rubric)
    try:
        cleaned = field.clean(text)
    except ValidationError:
        return False, None
    return True, canonical(field, cleaned)


# Stages -------------------------------------------------------------------------------------


def reveals_loose(raw: Any) -> dict[str, Any] | None:
    """The reveal records as given, or None when they are not even JSON objects."""
    if raw in (None, ""):
        return {}
    if isinstance(raw, str):
        try:
            raw = json.loads(raw)
        except ValueError:
            return None
    return dict(raw) if isinstance(raw, dict) else None


def revealed_stage(rubric: Rubric, reveals: Mapping[str, Any] | None) -> int:
    stage = 1
    while stage < rubric.stage_count and isinstance((reveals or {}).get(str(stage + 1)), dict):
        stage += 1
    return stage


def stage_complete(rubric: Rubric, slots: Sequence[Slot], stage: int, data: Mapping[str, Any]) -> bool:
    return all(
        answered(slot, rubric, data.get(slot.name, ""))[0]
        for slot in slots
        if slot.criterion.stage == stage and slot.criterion.required
    )


def snapshot(rubric: Rubric, slots: Sequence[Slot], stage: int, data: Mapping[str, Any]) -> dict[str, Any]:
    """The answers to stages up to ``stage`` as they stand: what the reveal of the next records."""
    record = {}
    for slot in slots:
        if slot.criterion.stage <= stage:
            ok, value = answered(slot, rubric, data.get(slot.name, ""))
            record[slot.name] = value if ok else None
    return record


# The form -----------------------------------------------------------------------------------


class RubricForm(WorkflowForm):
    """The project's criteria, up to the stage revealed so far."""

    def __init__(self, *args: Any, view: ItemView, **kwargs: Any) -> None:
        super().__init__(*args, view=view, **kwargs)
        self.rubric: Rubric = view.extra["rubric"]
        self.slots: list[Slot] = view.extra["slots"]
        source = self.data if self.is_bound else self.initial
        self.revealed_stage = revealed_stage(self.rubric, reveals_loose(source.get(REVEALS)))
        self.fields = {
            slot.name: slot_field(slot, self.rubric)
            for slot in self.slots
            if slot.criterion.stage <= self.revealed_stage
        }
        if self.rubric.stage_count > 1:
            self.fields[REVEALS] = forms.CharField(label="", required=False, widget=forms.HiddenInput)
        self.checked_reveals: dict[str, dict[str, Any]] = {}

    # What the display shows at this stage.

    @property
    def shown_context(self) -> frozenset[str]:
        return self.rubric.context_at(self.revealed_stage)

    @property
    def next_stage(self) -> int | None:
        return self.revealed_stage + 1 if self.revealed_stage < self.rubric.stage_count else None

    @property
    def next_stage_title(self) -> str:
        return self.rubric.stages[self.revealed_stage].title if self.next_stage else ""

    @property
    def stage_title(self) -> str:
        return self.rubric.stages[self.revealed_stage - 1].title

    @property
    def next_stage_parts(self) -> str:
        next_stage = self.next_stage
        parts = self.rubric.parts_revealed_at(next_stage) if next_stage else ()
        return ", ".join(PART_LABELS[part] for part in parts)

    @property
    def hidden_context(self) -> dict[str, int]:
        """Parts not shown yet, with the stage that reveals them."""
        return {part: stage for part, stage in self.rubric.context if stage > self.revealed_stage}

    @property
    def hidden_parts(self) -> list[tuple[str, int]]:
        """Hidden parts the display mentions on their own (figures and captions are mentioned
        where they would be)."""
        return [
            (PART_LABELS[part], stage)
            for part, stage in self.hidden_context.items()
            if part not in ("figure", "caption")
        ]

    @property
    def shows_figures(self) -> bool:
        return any(part in ("figure", "caption") for part, _ in self.rubric.context)

    def clean(self) -> dict[str, Any]:
        data = super().clean() or {}
        if self.rubric.stage_count > 1:
            self._check_reveals(data.get(REVEALS))
        if self.rubric.unit == "pair" and len(self.view.extra["pair"]) < 2:
            raise ValidationError("This item no longer has two answers to compare; skip it.")
        if self.next_stage and not self.errors:
            raise ValidationError(
                f"Stage {self.revealed_stage} is answered: reveal stage {self.next_stage} "
                f"({self.next_stage_title}) with r and answer it before you submit."
            )
        return data

    def _check_reveals(self, raw: Any) -> None:
        """The reveal records must cover exactly the stages shown, each with the earlier
        criteria and values of their scales."""
        reveals = reveals_loose(raw)
        expected = {str(stage) for stage in range(2, self.revealed_stage + 1)}
        if reveals is None or set(reveals) != expected:
            self.add_error(None, DAMAGED_REVEALS)
            return
        checked: dict[str, dict[str, Any]] = {}
        for stage_text in sorted(expected, key=int):
            record = reveals[stage_text]
            names = [slot.name for slot in self.slots if slot.criterion.stage < int(stage_text)]
            if not isinstance(record, dict) or set(record) != set(names):
                self.add_error(None, DAMAGED_REVEALS)
                return
            checked[stage_text] = {}
            for name in names:
                value = record[name]
                if value is None or value == "":
                    checked[stage_text][name] = value  # unanswered then (an optional criterion)
                    continue
                field = self.fields[name]
                try:
                    checked[stage_text][name] = canonical(field, field.clean(form_text(value)))
                except ValidationError:
                    self.add_error(None, DAMAGED_REVEALS)
                    return
        self.checked_reveals = checked

    def to_payload(self) -> Payload:
        data = self.cleaned_data
        values = {slot.name: canonical(self.fields[slot.name], data[slot.name]) for slot in self.slots}
        payload: Payload = {}
        if self.rubric.repeat:
            tags: list[str] = self.view.extra["cited_tags"]
            payload["cited_images"] = [
                {"tag": tag, **{c.key: values[f"{c.key}__{index}"] for c in self.rubric.criteria}}
                for index, tag in enumerate(tags, 1)
            ]
            payload["no_cited_images"] = not tags
        else:
            payload.update(values)
        if self.rubric.stage_count > 1:
            reveals = self.checked_reveals
            payload[REVEALS] = reveals
            payload["changed_after_reveal"] = [
                slot.name
                for slot in self.slots
                if any(slot.name in record and record[slot.name] != values[slot.name] for record in reveals.values())
            ]
        if self.rubric.unit == "pair":
            payload["pair"] = self.view.extra["pair_record"]
        payload["rubric"] = {"name": self.rubric.name, "version": self.rubric.version}
        return payload
