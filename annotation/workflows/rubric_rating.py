"""``rubric_rating``: rate items or model answers with a rubric the project configures.

The rubric (criteria, their scales, optional stages, what is shown) lives in
``Project.workflow_config``: ``rubrics.py`` holds its schema and checks, ``rubric_presets.py``
the presets (SciDQA's four aspects, VinQA's answer and per-cited-image rubrics, pairwise
preference, SPIQA's two-stage figure check and its human / machine / unsure question), and
``rubric_forms.py`` the form built from it.

Units of work, chosen by the rubric's ``unit``:

- ``item``: one queue entry per QA item;
- ``candidate``: one per candidate answer. With ``"repeat": "cited_images"`` the criteria are
  rated once for every image the answer cites (``[chart_1]``, ``[table_2]``, ``[figure_3]``);
  an answer citing none is recorded with ``no_cited_images`` and nothing to rate;
- ``pair``: one per QA item with at least two candidate answers. The two compared are the
  item's first two candidates, those of ``pair_systems`` first in that order. Which is shown as
  A and which as B is drawn from a seed derived from (project, item), so every annotator and
  every reload sees the same order, and the payload records it under ``pair``.

Stages: the fields of stage n+1, and the context it reveals (say, the caption), are not sent
to the browser until every required criterion of stage n is answered and stored (the reveal
button saves a draft and shows the item again). At the reveal the earlier answers are copied
into ``reveals`` ({"2": {criterion: answer, ...}}); an earlier answer may still be changed
afterwards, and the payload then lists it in ``changed_after_reveal`` next to the answer given
before the reveal. A payload sent without ``reveals`` (a script using the API never saw a
reveal) records the earlier answers as they are at the submit.

Keyboard: the criterion under work is highlighted; number keys choose its options (a scale of
single-digit whole numbers uses the numbers themselves, anything else 1 to 9 then 0 for the
tenth) and move on to the next criterion; j / k move between criteria; r reveals the next stage.
"""

from __future__ import annotations

import hashlib
import json
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from django import forms

from annotation.models import CandidateAnswer, ContentType, Figure, Project, ProjectItem
from annotation.workflows import register
from annotation.workflows.base import (
    ConfigInvalid,
    ItemView,
    LabelField,
    Payload,
    Shortcut,
    Workflow,
)
from annotation.workflows.rubric_forms import (
    REVEALS,
    RubricForm,
    Slot,
    answered,
    form_text,
    revealed_stage,
    reveals_loose,
    rubric_for,
    slot_field,
    slots_for,
    snapshot,
    stage_complete,
)
from annotation.workflows.rubrics import MAX_CITED_IMAGES, Rubric, RubricInvalid, rubric_parse

# "[chart_1]", "[Table_2]", "[figure_3]": VinQA's tags for cited visual elements.
CITED_TAG = re.compile(r"\[(chart|table|figure)_(\d+)\]", re.IGNORECASE)
CHART_FIGURE_TYPES = frozenset({"plot", "chart"})


@dataclass(frozen=True, slots=True)
class CitedImage:
    tag: str
    figure: Figure | None
    description: str
    context_above: str
    context_bottom: str


@dataclass(frozen=True, slots=True)
class AnswerBlock:
    """A paragraph of the rated answer, with the images it is the first to cite."""

    text: str
    images: tuple[CitedImage, ...] = ()


def cited_tags(text: str) -> list[str]:
    """The distinct tags an answer cites, lower-cased, in order of first citation."""
    tags = (f"{match.group(1).lower()}_{int(match.group(2))}" for match in CITED_TAG.finditer(text))
    return list(dict.fromkeys(tags))


def context_elements(figures: Sequence[Figure]) -> dict[str, Figure]:
    """The item's figures by their tag: ``extra["tag"]`` when the import gave one, else the
    category (table, chart for plots, figure) numbered within the item in evidence order."""
    counters: dict[str, int] = {}
    elements: dict[str, Figure] = {}
    for figure in figures:
        given = figure.extra.get("tag") if isinstance(figure.extra, dict) else None
        tags = cited_tags(f"[{str(given).strip().strip('[]')}]") if given else []
        if tags:
            tag = tags[0]
        else:
            category = "table" if figure.content_type == ContentType.TABLE else "figure"
            if category == "figure" and figure.figure_type in CHART_FIGURE_TYPES:
                category = "chart"
            counters[category] = counters.get(category, 0) + 1
            tag = f"{category}_{counters[category]}"
        elements.setdefault(tag, figure)
    return elements


def _extra_text(figure: Figure | None, key: str) -> str:
    if figure is None or not isinstance(figure.extra, dict):
        return ""
    value = figure.extra.get(key)
    return value.strip() if isinstance(value, str) else ""


def cited_image(tag: str, figure: Figure | None) -> CitedImage:
    description = _extra_text(figure, "description") or (figure.caption if figure is not None else "")
    return CitedImage(
        tag=tag,
        figure=figure,
        description=description,
        context_above=_extra_text(figure, "context_above"),
        context_bottom=_extra_text(figure, "context_bottom"),
    )


def answer_blocks(text: str, images: Mapping[str, CitedImage]) -> list[AnswerBlock]:
    """The answer in paragraphs, each cited image placed before the paragraph citing it first."""
    stripped = text.strip()
    paragraphs = re.split(r"\n\s*\n", stripped) if stripped else []
    if len(paragraphs) == 1:
        paragraphs = [line for line in paragraphs[0].splitlines() if line.strip()]
    placed: set[str] = set()
    blocks = []
    for paragraph in paragraphs:
        first = [tag for tag in cited_tags(paragraph) if tag in images and tag not in placed]
        placed.update(first)
        blocks.append(AnswerBlock(text=paragraph.strip(), images=tuple(images[tag] for tag in first)))
    return blocks


def pair_seed(project_id: int, item_id: int) -> str:
    return f"rubric_rating pair order: project {project_id}, item {item_id}"


def pair_swapped(seed: str) -> bool:
    """Whether the pair is shown in the reverse of its listed order: a fair coin from the seed,
    the same in every process (unlike ``hash``)."""
    return hashlib.sha256(seed.encode()).digest()[0] % 2 == 1


def pair_listed(candidates: Sequence[CandidateAnswer], systems: Sequence[str]) -> list[CandidateAnswer]:
    """The item's candidates, those of ``systems`` first in that order, then the rest by position."""
    chosen = [c for system in systems for c in candidates if c.system_name == system]
    return chosen + [c for c in candidates if c.system_name not in systems]


class CitedImageMean(LabelField):
    """A per-image criterion as one label per answer: the mean over its cited images (VinQA's
    aggregation, vinqa-rubrics.md §2), None for an answer that cites none."""

    def value(self, payload: Payload) -> Any:
        entries = payload.get("cited_images") or []
        numbers = [
            float(entry[self.name])
            for entry in entries
            if isinstance(entry, dict)
            and isinstance(entry.get(self.name), int | float)
            and not isinstance(entry[self.name], bool)
        ]
        return sum(numbers) / len(numbers) if numbers else None


@register
class RubricRating(Workflow):
    name = "rubric_rating"
    label = "Rubric rating (configurable criteria and scales)"
    description = (
        "Rate items, model answers or pairs of answers with a rubric: SciDQA's aspects, VinQA's rubrics, "
        "pairwise preference, SPIQA's two-stage figure check, or your own."
    )
    template_name = "annotation/workflows/rubric_rating.html"
    form_class = RubricForm
    # The fields come from each project's rubric: see fields_for.
    label_fields = ()
    shortcuts = (
        Shortcut("1 to 9, 0", "Choose an option of the highlighted criterion (0 is the tenth) and move on"),
        Shortcut("0 / 1 … 9", "On a scale of whole numbers 0 to 9, the number itself"),
        Shortcut("j / k", "Next / previous criterion"),
        Shortcut("r", "Reveal the next stage, once this one is answered"),
        Shortcut("Esc, then j", "Leave a text box and move on"),
    )
    default_guidelines = """\
# Rating with a rubric

Each criterion of this project's rubric is in the form beside the item, with its scale and
the definition of every point. Rate each criterion on its own; do not let one criterion
decide another.

**Keyboard.** The criterion you are on is highlighted. Number keys choose its options and move
on to the next criterion: on a scale of whole numbers from 0 to 9 (0/1, 1-5) the number
itself, otherwise 1 to 9 in order and 0 for the tenth (so 0 is 10 on a 1-10 scale). `j` and `k`
move down and up; a text box takes the cursor when you reach it, and `Esc` leaves it.

**Stages.** Some rubrics reveal more (for example a figure's caption) only once you have
answered the first questions. Press `r` to reveal the next stage. You may still change an
earlier answer afterwards; the record keeps the answer you gave before the reveal as well.

## The preset rubrics and their sources

- **SciDQA, four aspects (1-10).** "Evaluate the model-generated answer on the following
  dimensions, providing a score from 1-10 for each (where 1 is poor and 10 is excellent):
  a) Relevance (1-10): How well does the answer address the specific question asked?
  b) Accuracy (1-10): To what extent is the information provided correct and aligned with the
  gold answer? c) Completeness (1-10): How thoroughly does the answer cover all aspects of the
  question compared to the gold answer? d) Conciseness (1-10): Does the answer provide
  information efficiently without unnecessary details?"
- **VinQA, answer rubric.** Relevancy (1-5): "whether the answer correctly addresses the
  question"; Completeness (1-5): "includes all necessary information from the retrieved
  context"; Faithfulness (0/1): "remains grounded in the source content without
  hallucinations". VinQA prints no level descriptions; those shown are Quire's (version 1).
- **VinQA, each cited image.** Effectiveness (1-5): "how well the cited image and its
  accompanying description contribute to the answer"; Position (0/1): "how appropriately the
  image is placed within the context of the answer"; Expression (0/1): "how faithfully the
  accompanying textual description reflects the visual content". Each cited image is shown
  before the paragraph that cites it, with its ground-truth description. An answer that cites
  no image has nothing to rate.
- **Pairwise preference.** Two answers to the same question, in a random order that is the
  same for everyone and recorded: A is better, B is better, a tie, or neither is acceptable,
  judged on comprehensiveness, factuality and clarity (SciDQA's human study).
- **SPIQA, two-stage figure check.** Task-1, the image only: "Does the image have information
  to help answer the question?" and "Can you try to guess the answer, otherwise explain why or
  why not". Task-2, with the caption revealed: "Does the image along with the caption, now
  have information to help answer the question?" and "(optional) Do you want to guess the
  answer now or share any new explanation?"
- **SPIQA, who wrote the question.** Whether the question "was generated by a human, machine
  or if they're unsure".
"""

    # Configuration.

    def check_config(self, config: Mapping[str, Any]) -> dict[str, Any]:
        try:
            return rubric_parse(config).as_config()
        except RubricInvalid as invalid:
            raise ConfigInvalid(invalid.messages) from None

    def unit_for(self, config: Mapping[str, Any]) -> str:
        return rubric_parse(config).unit

    def form_fields(self, project: Project) -> Mapping[str, forms.Field]:
        rubric = rubric_for(project)
        tags = [f"image {n}" for n in range(1, MAX_CITED_IMAGES + 1)]
        fields = {slot.name: slot_field(slot, rubric) for slot in slots_for(rubric, tags)}
        if rubric.stage_count > 1:
            fields[REVEALS] = forms.CharField(required=False)
        return fields

    def fields_for(self, project: Project) -> tuple[LabelField, ...]:
        rubric = rubric_for(project)
        fields: list[LabelField] = []
        for criterion in rubric.criteria:
            if rubric.repeat:
                label = f"{criterion.label} (mean over cited images)"
                fields.append(CitedImageMean(criterion.key, label, "interval"))
                continue
            values = criterion.values() if criterion.level in ("nominal", "ordinal") else ()
            fields.append(LabelField(criterion.key, criterion.label, criterion.level, values))
        if rubric.repeat:
            fields.append(LabelField("no_cited_images", "No cited images", "nominal", (False, True)))
        return tuple(fields)

    def gold_fields(self, payload: Payload, project: Project | None = None) -> Payload:
        gold = super().gold_fields(payload, project)
        for key in ("cited_images", "pair"):
            if key in payload:
                gold[key] = payload[key]
        return gold

    # The item.

    def item_view(self, project_item: ProjectItem) -> ItemView:
        project = project_item.project
        rubric = rubric_for(project)
        item = project_item.item
        parts = {part for part, _ in rubric.context}
        figures: list[Figure] = []
        if rubric.repeat or parts & {"figure", "caption"}:
            figures = list(Figure.objects.filter(evidence_links__item=item).order_by("evidence_links__position"))
        extra: dict[str, Any] = {"rubric": rubric, "evidence": figures, "cited_tags": [], "cited_images": []}
        candidate = project_item.candidate
        if rubric.unit == "candidate":
            text = candidate.text if candidate is not None else ""
            images: dict[str, CitedImage] = {}
            if rubric.repeat:
                elements = context_elements(figures)
                tags = cited_tags(text)[:MAX_CITED_IMAGES]
                images = {tag: cited_image(tag, elements.get(tag)) for tag in tags}
                extra["cited_tags"] = tags
                extra["cited_images"] = list(images.values())
            extra["answer_blocks"] = answer_blocks(text, images)
        if rubric.unit == "pair":
            self._add_pair(extra, project.pk, project_item, rubric)
        extra["slots"] = slots_for(rubric, extra["cited_tags"])
        return ItemView(project_item=project_item, extra=extra)

    def _add_pair(self, extra: dict[str, Any], project_id: int, project_item: ProjectItem, rubric: Rubric) -> None:
        candidates = list(CandidateAnswer.objects.filter(item_id=project_item.item_id).order_by("position", "pk"))
        listed = pair_listed(candidates, rubric.pair_systems)[:2]
        seed = pair_seed(project_id, project_item.item_id)
        swapped = pair_swapped(seed)
        shown = list(reversed(listed)) if swapped else listed
        extra["pair"] = list(zip("AB", shown, strict=False))
        extra["pair_record"] = {
            **{letter: {"candidate": c.pk, "system": c.system_name} for letter, c in extra["pair"]},
            "seed": seed,
            "swapped": swapped,
        }

    def api_context(self, project_item: ProjectItem) -> dict[str, Any]:
        """A pair's two answers as the workbench shows them: lettered in the item's fixed order,
        without system names (raters compare blind)."""
        rubric = rubric_for(project_item.project)
        if rubric.unit != "pair":
            return {}
        extra: dict[str, Any] = {}
        self._add_pair(extra, project_item.project_id, project_item, rubric)
        return {"pair": [{"letter": letter, "text": candidate.text} for letter, candidate in extra["pair"]]}

    def form_data(self, view: ItemView, payload: Payload) -> dict[str, Any]:
        rubric: Rubric = view.extra["rubric"]
        slots: list[Slot] = view.extra["slots"]
        by_tag = {entry.get("tag"): entry for entry in payload.get("cited_images") or [] if isinstance(entry, dict)}
        data: dict[str, Any] = {}
        for slot in slots:
            entry = by_tag.get(slot.tag) if slot.tag else None
            raw = entry.get(slot.criterion.key) if entry is not None else payload.get(slot.name)
            data[slot.name] = form_text(raw)
        if rubric.stage_count > 1:
            data[REVEALS] = self._reveals_text(rubric, slots, payload.get(REVEALS), data)
        return data

    def _reveals_text(self, rubric: Rubric, slots: list[Slot], raw: Any, data: Mapping[str, Any]) -> str:
        """The reveal records with any stage now due added: a stage whose required answers are
        all given reveals the next, recording the answers as they stand."""
        reveals = reveals_loose(raw)
        if reveals is None:
            return form_text(raw)  # kept as sent, so that the form says it is damaged
        stage = revealed_stage(rubric, reveals)
        while stage < rubric.stage_count and stage_complete(rubric, slots, stage, data):
            reveals[str(stage + 1)] = snapshot(rubric, slots, stage, data)
            stage += 1
        return json.dumps(reveals) if reveals else ""

    def warnings(self, view: ItemView, payload: Payload) -> list[str]:
        rubric: Rubric = view.extra["rubric"]
        notes = []
        if rubric.repeat and not view.extra["cited_tags"]:
            notes.append("This answer cites no image, so there is nothing to rate: submit it as it is.")
        missing = [image.tag for image in view.extra["cited_images"] if image.figure is None]
        if missing:
            notes.append(f"Cited but not among this item's figures and tables: {', '.join(missing)}.")
        if rubric.stage_count > 1:
            notes.extend(self._changed_notes(view, payload))
        return notes

    def _changed_notes(self, view: ItemView, payload: Payload) -> list[str]:
        rubric: Rubric = view.extra["rubric"]
        slots: list[Slot] = view.extra["slots"]
        data = self.form_data(view, payload)
        reveals = reveals_loose(payload.get(REVEALS)) or {}
        notes = []
        for slot in slots:
            before = [
                record[slot.name] for record in reveals.values() if isinstance(record, dict) and slot.name in record
            ]
            if not before:
                continue
            now = answered(slot, rubric, data.get(slot.name, ""))[1]
            if now != before[0]:
                notes.append(
                    f"You changed “{slot.criterion.label}” after the next stage was revealed; "
                    f"the answer you gave before ({form_text(before[0]) or 'none'}) stays in the record too."
                )
        return notes
