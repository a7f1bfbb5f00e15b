"""``m3sciqa_validation``: checking M3SciQA questions (shared/reference/m3sciqa.md §2-3).

Two kinds of item, told apart by how the M3SciQA importer marks them (``extra.file_kind``):

- **locality** questions: lines of ``locality.jsonl``, or questions written in an
  ``m3sciqa_locality`` project and published for validation (``QAItem.author`` is the
  writer, whom the queue never gives them). The validator checks the question, its
  reasoning type, the direct answer and the gold reference, as the paper's third annotator did.
- **combined** questions: lines of ``combined_*.jsonl``, GPT-4's merge of a locality
  question with a generated detail question. The validator checks validity, whether the
  two parts are logically connected, clarity and redundancy, corrects the detail reasoning
  type (Table 7) where GPT-4 got it wrong, and rephrases when necessary (§2.3).

An invalid question is dropped from the curated export; a valid one goes out with its
rephrase and corrected reasoning type. Fields that do not apply to an item's kind are left
out of its payload, so agreement treats them as missing rather than as a category.
"""

from __future__ import annotations

from typing import Any

from django import forms
from django.db.models import Q

from annotation.importers.formats.m3sciqa import COMBINED, arxiv_url
from annotation.models import Evidence, Paper, ProjectItem, QAItem
from annotation.workflows import register
from annotation.workflows.base import ItemView, LabelField, Payload, Shortcut, Workflow, WorkflowForm
from annotation.workflows.m3sciqa_locality import LOCALITY_TYPE_NAMES, LOCALITY_TYPES, item_figures, type_table
from annotation.workflows.widgets import KeyedCheckboxSelectMultiple, KeyedRadioSelect, keyed

LOCALITY, COMBINED_KIND = "locality", COMBINED
VERDICTS = [("valid", "Valid"), ("invalid", "Invalid")]
INVALID_REASONS = [
    ("wrong_reasoning_type", "Wrong reasoning type: fits none of the types (correct a fixable type below instead)"),
    ("duplicate", "Duplicate of another question"),
    ("overly_complex", "Overly complex"),
    ("answerable_without_paper", "Answerable without the paper: needs no specific insight from it"),
    ("unclear", "Unclear, and no rephrase can fix it"),
    ("wrong_answer", "The answer or the gold reference paper is wrong"),
    ("not_connected", "The locality and detail parts are not logically connected, relevant or consistent"),
]
REASON_KEYS = {value: str(number) for number, (value, _) in enumerate(INVALID_REASONS, 1)}
COMBINED_ONLY_REASONS = frozenset({"not_connected"})
# Table 7 of the paper, definitions verbatim.
DETAIL_TYPES: tuple[tuple[str, str, str], ...] = (
    (
        "Conceptual Understanding",
        "Shift+1",
        "Evaluate knowledge of essential concepts, basic theories, and critical definitions related to the subject.",
    ),
    (
        "Methodological Analysis",
        "Shift+2",
        "Examine and assess the research methodologies and experimental frameworks employed in studies, with an "
        "emphasis on their efficacy and constraints.",
    ),
    (
        "Results and Data Interpretation",
        "Shift+3",
        "Analyze statistical data, graphs, and tables, focusing on deriving significant insights and conclusions "
        "from quantitative and visual information.",
    ),
    (
        "Implications and Inferences",
        "Shift+4",
        "Infer wider implications and practical uses of study outcomes, concentrating on the extensive impact and "
        "prospective significance of the results.",
    ),
    (
        "Critical Analysis",
        "Shift+5",
        "Assess the study's reasoning, robustness of evidence, and validity of conclusions critically, with a focus "
        "on logical consistency and the support of empirical data.",
    ),
)
DETAIL_TYPE_NAMES = tuple(name for name, _, _ in DETAIL_TYPES)
CLARITY = [("clear", "Clear"), ("unclear", "Unclear")]
REDUNDANCY = [("redundant", "Yes, redundant"), ("not_redundant", "No")]
QUESTION_LIMIT = 3000
# Form fields that only one kind of item has.
LOCALITY_FIELDS = ("reasoning_type",)
COMBINED_FIELDS = ("detail_reasoning_type", "clarity", "redundancy")


def item_kind(item: QAItem) -> str:
    """'combined' for a line of combined_*.jsonl, else 'locality' (imported or written in Quire)."""
    return COMBINED_KIND if item.extra.get("file_kind") == COMBINED else LOCALITY


def _normalised(text: str) -> str:
    return " ".join(text.split())


def _original_type(item: QAItem, kind: str) -> str:
    """The type the question came with, if it is one of the kind's named types."""
    if kind == COMBINED_KIND:
        value = str(item.extra.get("reference_reasoning_type", ""))
        return value if value in DETAIL_TYPE_NAMES else ""
    value = str(item.extra.get("anchor_reasoning_type", ""))
    return value if value in LOCALITY_TYPE_NAMES else ""


def _type_field(kind: str) -> str:
    return "detail_reasoning_type" if kind == COMBINED_KIND else "reasoning_type"


_GUIDELINES_TEMPLATE = """\
# Validating M3SciQA questions

You never get a question you wrote yourself. Read the question with its figure or table,
answer and reference paper, then decide whether it is **valid**.

## Locality questions

A locality question is about one figure or table of the anchor paper; its answer is one
entity in the image (the **direct answer**), which leads to the **gold reference paper**:
"the single reference paper to which the locality-specific question directly refers."
Check the accuracy and relevance of the question, the direct answer and the gold reference.
Check the reasoning type against the definitions (Table 6) and correct it when it is wrong:

{locality_types}

## Combined questions

GPT-4 merged a locality question with a detail question generated from the reference
paper. Verify "the question validity" and rephrase "when necessary": make sure the locality
part and the detail part are "logically connected and relevant", and check "for clarity,
consistency, and redundancy". Most combined questions begin "Consider the paper that
introduces …": the question should point to the paper through the image, not name it.

The detail question's reasoning type was assigned by GPT-4; correct it when it is wrong
(Table 7):

{detail_types}

## When a question is invalid

Mark it invalid, with every reason that applies. The paper filtered out "duplicates, overly
complex questions, questions that do not require specific insights from the paper (e.g.,
"What is the mathematical expression for calculating the F-1 score?"), and questions that do
not belong to any of the five predefined reasoning types":

1. wrong reasoning type: no type fits (a type that is merely wrong is corrected instead);
2. duplicate of another question (pick which one when it is listed);
3. overly complex;
4. answerable without the paper;
5. unclear, beyond what a rephrase can fix;
6. the answer or the gold reference paper is wrong;
7. (combined questions) the two parts are not logically connected, relevant or consistent.

## Rules the form checks

- An invalid question needs at least one reason; a valid one has none.
- An invalid question is dropped, so it is not rephrased.
- A valid combined question that is unclear or redundant needs a rephrase.
- A valid question needs a reasoning type (pre-filled with the one it came with).
"""
LOCALITY_DEFINITIONS = type_table(
    ("Type", "Definition"), ((name, definition) for name, _, definition, _ in LOCALITY_TYPES)
)
DETAIL_DEFINITIONS = type_table(("Type", "Definition"), ((name, definition) for name, _, definition in DETAIL_TYPES))


class ValidationForm(WorkflowForm):
    verdict = forms.ChoiceField(
        label="Is the question valid?",
        required=False,
        choices=VERDICTS,
        widget=KeyedRadioSelect(keys={"valid": "y", "invalid": "n"}),
    )
    invalid_reasons = forms.MultipleChoiceField(
        label="Why invalid?",
        required=False,
        choices=INVALID_REASONS,
        widget=KeyedCheckboxSelectMultiple(keys=REASON_KEYS),
    )
    duplicate_of = forms.ChoiceField(
        label="Duplicate of (optional)", required=False, widget=forms.Select(attrs=keyed("u"))
    )
    reasoning_type = forms.ChoiceField(
        label="Reasoning type",
        required=False,
        choices=[(name, name) for name in LOCALITY_TYPE_NAMES],
        help_text="Pre-filled with the type the question was written with; change it if it is wrong.",
        widget=KeyedRadioSelect(keys={name: key for name, key, _, _ in LOCALITY_TYPES}),
    )
    detail_reasoning_type = forms.ChoiceField(
        label="Detail reasoning type",
        required=False,
        choices=[(name, name) for name in DETAIL_TYPE_NAMES],
        help_text="Pre-filled with the type GPT-4 assigned to the detail question; change it if it is wrong.",
        widget=KeyedRadioSelect(keys={name: key for name, key, _ in DETAIL_TYPES}),
    )
    clarity = forms.ChoiceField(
        label="Is the combined question clear?",
        required=False,
        choices=CLARITY,
        widget=KeyedRadioSelect(keys={"clear": "Shift+C", "unclear": "Shift+U"}),
    )
    redundancy = forms.ChoiceField(
        label="Is it redundant (says something twice, or more than it needs)?",
        required=False,
        choices=REDUNDANCY,
        widget=KeyedRadioSelect(keys={"redundant": "r", "not_redundant": "Shift+R"}),
    )
    rephrased_question = forms.CharField(
        label="Rephrased question",
        required=False,
        max_length=QUESTION_LIMIT,
        help_text="Pre-filled with the question; edit it to rephrase. The diff shows your changes.",
        widget=forms.Textarea(attrs=keyed("q", {"rows": 4})),
    )
    note = forms.CharField(
        label="Note (optional)", required=False, max_length=2000, widget=forms.Textarea(attrs=keyed("o", {"rows": 2}))
    )

    def __init__(self, *args: Any, view: ItemView, **kwargs: Any) -> None:
        super().__init__(*args, view=view, **kwargs)
        self.kind: str = view.extra["kind"]
        for name in COMBINED_FIELDS if self.kind == LOCALITY else LOCALITY_FIELDS:
            del self.fields[name]
        reasons_field = self.fields["invalid_reasons"]
        assert isinstance(reasons_field, forms.MultipleChoiceField)
        if self.kind == LOCALITY:
            reasons_field.choices = [(v, label) for v, label in INVALID_REASONS if v not in COMBINED_ONLY_REASONS]
        others: list[QAItem] = view.extra["same_figure_questions"]
        duplicate_field = self.fields["duplicate_of"]
        assert isinstance(duplicate_field, forms.ChoiceField)
        duplicate_field.choices = [("", "—")] + [(q.external_id, _shorten(q.question)) for q in others]

    def clean(self) -> dict[str, Any]:
        data = super().clean() or {}
        verdict = data.get("verdict")
        reasons = data.get("invalid_reasons") or []
        rephrased = self._rephrase(data)
        if not verdict and "verdict" not in self.errors:
            self.add_error("verdict", "Say whether the question is valid.")
        if verdict == "invalid":
            if not reasons:
                self.add_error("invalid_reasons", "An invalid question needs at least one reason.")
            if rephrased:
                self.add_error(
                    "rephrased_question",
                    "An invalid question is dropped, so it is not rephrased: undo the rephrase, or mark it valid.",
                )
        if verdict == "valid" and reasons:
            self.add_error("invalid_reasons", "Reasons are only for invalid questions: clear them, or mark it invalid.")
        self._check_type(data, verdict, reasons)
        if self.kind == COMBINED_KIND:
            self._check_combined(data, verdict, reasons, rephrased)
        return data

    def _rephrase(self, data: dict[str, Any]) -> str:
        """The rephrased question when it differs from the original, else ""."""
        text = _normalised(data.get("rephrased_question") or "")
        original = _normalised(self.view.project_item.item.question)
        return text if text and text != original else ""

    def _check_type(self, data: dict[str, Any], verdict: str | None, reasons: list[str]) -> None:
        name = _type_field(self.kind)
        chosen = data.get(name)
        original = self.view.extra["original_type"]
        if verdict == "valid" and not chosen and name not in self.errors:
            self.add_error(name, "Choose the reasoning type the question has.")
        if "wrong_reasoning_type" in reasons and chosen and original and chosen != original:
            self.add_error(
                "invalid_reasons",
                "You corrected the reasoning type, so a type fits: drop the reason 'fits none of the types', "
                "or keep the original type.",
            )

    def _check_combined(self, data: dict[str, Any], verdict: str | None, reasons: list[str], rephrased: str) -> None:
        clarity, redundancy = data.get("clarity"), data.get("redundancy")
        if not clarity and "clarity" not in self.errors:
            self.add_error("clarity", "Say whether the combined question is clear.")
        if not redundancy and "redundancy" not in self.errors:
            self.add_error("redundancy", "Say whether the combined question is redundant.")
        if "unclear" in reasons and clarity == "clear":
            self.add_error("clarity", "You gave 'unclear' as a reason: mark the question as unclear too.")
        if verdict == "valid" and not rephrased:
            if clarity == "unclear":
                self.add_error(
                    "rephrased_question", "A valid question that is unclear needs a rephrase that makes it clear."
                )
            if redundancy == "redundant":
                self.add_error(
                    "rephrased_question", "A valid question that is redundant needs a rephrase without the redundancy."
                )

    def to_payload(self) -> Payload:
        data = self.cleaned_data
        reasons = [value for value, _ in INVALID_REASONS if value in data["invalid_reasons"]]
        payload: Payload = {
            "verdict": data["verdict"],
            "invalid_reasons": reasons,
            "duplicate_of": data["duplicate_of"] if "duplicate" in reasons else "",
        }
        if self.kind == COMBINED_KIND:
            payload["detail_reasoning_type"] = data["detail_reasoning_type"] or None
            payload["clarity"] = data["clarity"]
            payload["redundancy"] = data["redundancy"]
        else:
            payload["reasoning_type"] = data["reasoning_type"] or None
        payload["rephrased_question"] = self._rephrase(data)
        payload["note"] = data["note"].strip()
        return payload


def _shorten(text: str, limit: int = 90) -> str:
    text = _normalised(text)
    return text if len(text) <= limit else text[: limit - 1] + "…"


@register
class M3sciqaValidation(Workflow):
    name = "m3sciqa_validation"
    label = "M3SciQA question validation"
    description = (
        "Validate locality questions written by others and imported generated or combined questions: valid or "
        "invalid with reasons, a corrected reasoning type and a rephrase."
    )
    template_name = "annotation/workflows/m3sciqa_validation.html"
    form_class = ValidationForm
    label_fields = (
        LabelField("verdict", "Valid", "nominal", tuple(value for value, _ in VERDICTS)),
        LabelField("invalid_reasons", "Reasons", "set", tuple(value for value, _ in INVALID_REASONS)),
        LabelField("reasoning_type", "Reasoning type", "nominal", LOCALITY_TYPE_NAMES),
        LabelField("detail_reasoning_type", "Detail reasoning type", "nominal", DETAIL_TYPE_NAMES),
        LabelField("clarity", "Clarity", "nominal", tuple(value for value, _ in CLARITY)),
        LabelField("redundancy", "Redundancy", "nominal", tuple(value for value, _ in REDUNDANCY)),
        LabelField("rephrased_question", "Rephrased question", "text"),
    )
    shortcuts = (
        Shortcut("y / n", "Valid / invalid"),
        Shortcut("1 to 7", "Toggle a reason (7: combined questions only)"),
        Shortcut("u", "Choose the question this one duplicates"),
        Shortcut("c / d / l / v", "Locality questions: Comparison / Data Extraction / Location / Visual Understanding"),
        Shortcut("Shift+1 to 5", "Combined questions: the detail reasoning type"),
        Shortcut("Shift+C / Shift+U", "Combined questions: clear / unclear"),
        Shortcut("r / Shift+R", "Combined questions: redundant / not redundant"),
        Shortcut("q", "Rephrase the question"),
        Shortcut("o", "Write a note"),
    )
    default_guidelines = _GUIDELINES_TEMPLATE.replace("{locality_types}", LOCALITY_DEFINITIONS).replace(
        "{detail_types}", DETAIL_DEFINITIONS
    )

    def item_view(self, project_item: ProjectItem) -> ItemView:
        item = project_item.item
        kind = item_kind(item)
        figures = item_figures(project_item)
        reference_id = str(item.extra.get("reference_arxiv_id", ""))
        reference = (
            Paper.objects.filter(dataset_id=item.dataset_id, external_id=reference_id).first() if reference_id else None
        )
        # The item's own image as a subquery, so the query runs (and counts) whatever the item cites.
        image = Evidence.objects.filter(item_id=item.pk).order_by("position", "pk").values("figure_id")[:1]
        same_figure = list(
            QAItem.objects.filter(
                Q(paper_id=item.paper_id),
                dataset_id=item.dataset_id,
                split=item.split,
                evidence_links__figure_id__in=image,
            )
            .exclude(pk=item.pk)
            .order_by("position", "pk")
            .only("pk", "external_id", "question", "answer", "split", "position")
        )
        anchor = item.paper
        return ItemView(
            project_item=project_item,
            extra={
                "kind": kind,
                "is_combined": kind == COMBINED_KIND,
                "written_in_quire": item.author_id is not None,
                "anchor": anchor,
                "anchor_url": arxiv_url(anchor.external_id) if anchor is not None else "",
                "figure": figures[0] if figures else None,
                "reference_id": reference_id,
                "reference_url": arxiv_url(reference_id) if reference_id else "",
                "reference": reference,
                "reference_abstract": str(reference.extra.get("abstract", "") or "") if reference else "",
                "original_type": _original_type(item, kind),
                "anchor_type": str(item.extra.get("anchor_reasoning_type", "")),
                "same_figure_questions": same_figure,
                "types": _type_rows(kind),
            },
        )

    def initial(self, view: ItemView) -> Payload:
        item = view.project_item.item
        kind = view.extra["kind"]
        start: Payload = {"verdict": "", "invalid_reasons": [], "duplicate_of": ""}
        start[_type_field(kind)] = view.extra["original_type"]
        if kind == COMBINED_KIND:
            start["clarity"] = ""
            start["redundancy"] = ""
        start["rephrased_question"] = item.question.strip()
        start["note"] = ""
        return start

    def form_data(self, view: ItemView, payload: Payload) -> dict[str, Any]:
        # "No rephrase" is stored as ""; the box still starts from the question.
        return {**payload, "rephrased_question": payload.get("rephrased_question") or view.project_item.item.question}

    def warnings(self, view: ItemView, payload: Payload) -> list[str]:
        item = view.project_item.item
        question = _normalised(str(payload.get("rephrased_question") or "")) or _normalised(item.question)
        entity = str(item.extra.get("answer_anchor", "")) if view.extra["kind"] == COMBINED_KIND else item.answer
        entity = _normalised(entity)
        if entity and entity.casefold() in question.casefold():
            return [f"The question names its locality answer ({entity}): it should point to it through the image."]
        return []

    def curated(self, item_fields: dict[str, Any], gold: Payload) -> dict[str, Any] | None:
        """None for an invalid question; else the item with its rephrase and corrected types,
        under the M3SciQA keys the exporter writes."""
        if gold.get("verdict") != "valid":
            return None
        curated = dict(item_fields)
        if gold.get("rephrased_question"):
            curated["question"] = gold["rephrased_question"]
        if gold.get("reasoning_type"):
            curated["anchor_reasoning_type"] = gold["reasoning_type"]
        if gold.get("detail_reasoning_type"):
            curated["reference_reasoning_type"] = gold["detail_reasoning_type"]
        return curated


def _type_rows(kind: str) -> list[dict[str, str]]:
    if kind == COMBINED_KIND:
        return [{"name": name, "key": key, "definition": definition} for name, key, definition in DETAIL_TYPES]
    return [{"name": name, "key": key, "definition": definition} for name, key, definition, _ in LOCALITY_TYPES]
