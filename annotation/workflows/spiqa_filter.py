"""``spiqa_filter``: SPIQA's test-A review of generated QA pairs (shared/reference/spiqa.md §1-2).

The form follows the paper's Fig. G.3 (answerable from the figure, keep or discard, modify
with the edited question and answer) and adds what §2 says it lacks: a discard reason
over the filtering criteria, the paper's other questions for the duplicate rule, a
figure-type correction and the choice of evidence figures.
"""

from __future__ import annotations

from typing import Any

from django import forms

from annotation.models import ContentType, Figure, Project, ProjectItem, QAItem
from annotation.workflows import register
from annotation.workflows.base import ItemView, LabelField, Payload, Shortcut, Workflow, WorkflowForm
from annotation.workflows.widgets import KeyedCheckboxSelectMultiple, KeyedRadioSelect, keyed

YES_NO = [("yes", "Yes"), ("no", "No")]
DECISIONS = [("keep", "Keep"), ("discard", "Discard")]
DISCARD_REASONS = [
    ("trivial_or_specific", "Too trivial or too specific to the figure (criterion 3)"),
    ("answer_incorrect", "The answer is incorrect or not to the point (criterion 2)"),
    ("duplicate", "Duplicate of another question of this paper (criterion 4)"),
    ("passage_only", "Answerable from the passage alone, not the image (criterion 5)"),
    ("answer_unclear", "The answer is not clear (criterion 6)"),
    ("other", "Other (say why in the note)"),
]
# The generation labels of SPIQA's prompts (§5), normalised.
FIGURE_TYPES = [
    ("plot", "Plot"),
    ("schematic", "Schematic"),
    ("photograph(s)", "Photograph(s)"),
    ("table", "Table"),
    ("other", "Other"),
]
TEXT_LIMIT = 5000


class SpiqaFilterForm(WorkflowForm):
    answerable_from_figure = forms.ChoiceField(
        label="Can the question be answered from the figure?",
        choices=YES_NO,
        widget=KeyedRadioSelect(keys={"yes": "y", "no": "n"}),
    )
    decision = forms.ChoiceField(
        label="Should we keep the question or discard it?",
        choices=DECISIONS,
        widget=KeyedRadioSelect(keys={"keep": "k", "discard": "d"}),
    )
    discard_reasons = forms.MultipleChoiceField(
        label="Why discard?",
        choices=DISCARD_REASONS,
        required=False,
        widget=KeyedCheckboxSelectMultiple(keys={value: str(n) for n, (value, _) in enumerate(DISCARD_REASONS, 1)}),
    )
    duplicate_of = forms.ChoiceField(label="Duplicate of", required=False, widget=forms.Select(attrs=keyed("u")))
    other_note = forms.CharField(
        label="Note", required=False, max_length=2000, widget=forms.Textarea(attrs=keyed("o", {"rows": 2}))
    )
    modify = forms.ChoiceField(
        label="Should the question or answer be modified?",
        choices=YES_NO,
        initial="no",
        widget=KeyedRadioSelect(keys={"yes": "m", "no": "Shift+M"}),
    )
    modified_question = forms.CharField(
        label="Modified question",
        required=False,
        max_length=TEXT_LIMIT,
        widget=forms.Textarea(attrs=keyed("q", {"rows": 3})),
    )
    modified_answer = forms.CharField(
        label="Modified answer",
        required=False,
        max_length=TEXT_LIMIT,
        widget=forms.Textarea(attrs=keyed("a", {"rows": 3})),
    )
    evidence_figures = forms.MultipleChoiceField(
        label="Evidence figures and tables",
        required=False,
        widget=KeyedCheckboxSelectMultiple(keys={}),
    )
    figure_type = forms.ChoiceField(label="Figure type", choices=FIGURE_TYPES, widget=forms.Select(attrs=keyed("t")))

    def __init__(self, *args: Any, view: ItemView, **kwargs: Any) -> None:
        super().__init__(*args, view=view, **kwargs)
        figures: list[Figure] = view.extra["figures"]
        evidence_field = self.fields["evidence_figures"]
        assert isinstance(evidence_field, forms.MultipleChoiceField)
        evidence_field.choices = [(f.file_name, f.file_name) for f in figures]
        # Shift+1..9 toggles the first nine figures, in the order of the thumbnails.
        evidence_widget = evidence_field.widget
        assert isinstance(evidence_widget, KeyedCheckboxSelectMultiple)
        evidence_widget.option_keys = {f.file_name: f"Shift+{n}" for n, f in enumerate(figures[:9], 1)}
        others: list[QAItem] = view.extra["other_questions"]
        duplicate_field = self.fields["duplicate_of"]
        assert isinstance(duplicate_field, forms.ChoiceField)
        duplicate_field.choices = [("", "—")] + [(q.external_id, _shorten(q.question)) for q in others]

    def clean(self) -> dict[str, Any]:
        data = super().clean() or {}
        item = self.view.project_item.item
        reasons = data.get("discard_reasons") or []
        if data.get("decision") == "discard":
            if not reasons:
                self.add_error("discard_reasons", "A discard needs at least one reason.")
            if "duplicate" in reasons and not data.get("duplicate_of"):
                self.add_error("duplicate_of", "Pick the question this one duplicates.")
            if "other" in reasons and not (data.get("other_note") or "").strip():
                self.add_error("other_note", "Say why in the note when the reason is 'other'.")
            if data.get("modify") == "yes":
                self.add_error("modify", "A discarded item is not modified: choose keep to keep your edit.")
        if data.get("decision") == "keep":
            if reasons:
                self.add_error("discard_reasons", "Discard reasons are only for discarded items.")
            if not data.get("evidence_figures"):
                self.add_error("evidence_figures", "A kept item needs at least one evidence figure or table.")
        if data.get("modify") == "yes" and _unchanged(data, item):
            self.add_error("modified_question", "'Modify' needs a changed question or answer.")
        return data

    def to_payload(self) -> Payload:
        data = self.cleaned_data
        modify = data["modify"] == "yes"
        discard = data["decision"] == "discard"
        reasons = [value for value, _ in DISCARD_REASONS if value in data["discard_reasons"]]
        chosen = set(data["evidence_figures"])
        figures: list[Figure] = self.view.extra["figures"]
        return {
            "answerable_from_figure": data["answerable_from_figure"],
            "decision": data["decision"],
            "discard_reasons": reasons,
            "duplicate_of": data["duplicate_of"] if discard and "duplicate" in reasons else "",
            "other_note": data["other_note"].strip(),
            "modify": data["modify"],
            "modified_question": data["modified_question"].strip() if modify else "",
            "modified_answer": data["modified_answer"].strip() if modify else "",
            # In thumbnail order, so equal sets are equal lists.
            "evidence_figures": [f.file_name for f in figures if f.file_name in chosen],
            "figure_type": data["figure_type"],
        }


def _shorten(text: str, limit: int = 90) -> str:
    text = " ".join(text.split())
    return text if len(text) <= limit else text[: limit - 1] + "…"


def _unchanged(data: dict[str, Any], item: QAItem) -> bool:
    question = (data.get("modified_question") or "").strip()
    answer = (data.get("modified_answer") or "").strip()
    return question in ("", item.question.strip()) and answer in ("", item.answer.strip())


@register
class SpiqaFilter(Workflow):
    name = "spiqa_filter"
    label = "SPIQA filtering (keep / discard / modify)"
    description = "Review model-generated QA pairs about a paper's figures, as for SPIQA test-A."
    payload_doc = """\
    {"answerable_from_figure": "yes", "decision": "keep", "discard_reasons": [],
     "modify": "no", "evidence_figures": ["1805.01234v2-Figure1-1.png"], "figure_type": "plot"}

`answerable_from_figure` and `modify` are "yes" or "no"; `decision` is "keep" or "discard".
`discard_reasons` is a subset of "trivial_or_specific", "answer_incorrect", "duplicate",
"passage_only", "answer_unclear", "other": a discard needs at least one, a keep none.
"duplicate" needs `duplicate_of` (the external id of the other question of the same paper)
and "other" needs `other_note`. `modify` "yes" needs a `modified_question` or
`modified_answer` that differs from the original. `evidence_figures` lists file names of the
paper's figures and tables; a kept item needs at least one. `figure_type` is one of "plot",
"schematic", "photograph(s)", "table", "other".
"""
    template_name = "annotation/workflows/spiqa_filter.html"
    form_class = SpiqaFilterForm
    label_fields = (
        LabelField("answerable_from_figure", "Answerable from the figure", "nominal", ("yes", "no")),
        LabelField("decision", "Keep or discard", "nominal", ("keep", "discard")),
        LabelField("discard_reasons", "Discard reasons", "set", tuple(v for v, _ in DISCARD_REASONS)),
        LabelField("modify", "Modify", "nominal", ("yes", "no")),
        LabelField("evidence_figures", "Evidence figures", "set"),
        LabelField("figure_type", "Figure type", "nominal", tuple(v for v, _ in FIGURE_TYPES)),
        LabelField("modified_question", "Modified question", "text"),
        LabelField("modified_answer", "Modified answer", "text"),
    )
    shortcuts = (
        Shortcut("y / n", "The question can / cannot be answered from the figure"),
        Shortcut("k / d", "Keep / discard"),
        Shortcut("1 to 6", "Toggle a discard reason"),
        Shortcut("u", "Choose the question this one duplicates"),
        Shortcut("o", "Write the note"),
        Shortcut("m / Shift+M", "Modify: yes / no"),
        Shortcut("q / a", "Edit the modified question / answer"),
        Shortcut("Shift+1 to 9", "Toggle an evidence figure"),
        Shortcut("t", "Correct the figure type"),
    )
    default_guidelines = """\
# Filtering generated questions (SPIQA test-A)

For each question, look at the figure or table it was generated from, its caption, the
answer and the model's explanation. Then decide whether to **keep** or **discard** it.

Keep a question only if all of these hold:

1. Answering it needs an understanding of the figure or table (and may need domain knowledge).
2. The generated answer is correct and to the point.
3. It is neither too trivial nor too specific to the figure (not "What does the blue line
   in Figure 1 represent?" or "How many rows are there in Table 2?").

Discard it, and say why, when:

4. another question of the same paper is similar (keep one of them; pick which it duplicates);
5. it is entirely based on the passage, so it cannot be answered from the image;
6. the answer is not clear ("It is hard to answer the question based on the given information").

Modify it when it includes phrases like "Based on the passage": the model sees all figures
and tables at once during evaluation. Edit the question or answer in the boxes; the diff
shows what you changed.

For a kept question, tick every figure or table that helps answer it (the one it was
generated from is ticked already), and correct the figure type if it is wrong.
"""

    def item_view(self, project_item: ProjectItem) -> ItemView:
        item = project_item.item
        figures: list[Figure] = []
        others: list[QAItem] = []
        if item.paper_id is not None:
            figures = list(Figure.objects.filter(paper_id=item.paper_id).order_by("position", "pk"))
            others = list(
                QAItem.objects.filter(paper_id=item.paper_id)
                .exclude(pk=item.pk)
                .order_by("split", "position")
                .only("pk", "external_id", "question", "answer", "split", "position")
            )
        evidence_ids = list(item.evidence_links.order_by("position").values_list("figure_id", flat=True))
        by_id = {f.pk: f for f in figures}
        return ItemView(
            project_item=project_item,
            extra={
                "figures": figures,
                "evidence": [by_id[pk] for pk in evidence_ids if pk in by_id],
                "other_questions": others,
            },
        )

    def initial(self, view: ItemView) -> Payload:
        item = view.project_item.item
        evidence: list[Figure] = view.extra["evidence"]
        return {
            "answerable_from_figure": "",
            "decision": "",
            "discard_reasons": [],
            "duplicate_of": "",
            "other_note": "",
            "modify": "no",
            "modified_question": item.question.strip(),
            "modified_answer": item.answer.strip(),
            "evidence_figures": [f.file_name for f in evidence],
            "figure_type": _figure_type(evidence[0]) if evidence else "other",
        }

    def form_data(self, view: ItemView, payload: Payload) -> dict[str, Any]:
        # A stored "no modification" has empty texts; the boxes still start from the original.
        item = view.project_item.item
        return {
            **payload,
            "modified_question": payload.get("modified_question") or item.question.strip(),
            "modified_answer": payload.get("modified_answer") or item.answer.strip(),
        }

    def gold_fields(self, payload: Payload, project: Project | None = None) -> Payload:
        return {
            "decision": payload.get("decision"),
            "modify": payload.get("modify"),
            "modified_question": payload.get("modified_question", ""),
            "modified_answer": payload.get("modified_answer", ""),
            "evidence_figures": payload.get("evidence_figures", []),
            "figure_type": payload.get("figure_type"),
            "discard_reasons": payload.get("discard_reasons", []),
        }

    def curated(self, item_fields: dict[str, Any], gold: Payload) -> dict[str, Any] | None:
        if gold.get("decision") != "keep":
            return None
        curated = dict(item_fields)
        if gold.get("modify") == "yes":
            curated["question"] = gold.get("modified_question") or curated["question"]
            curated["answer"] = gold.get("modified_answer") or curated["answer"]
        if gold.get("evidence_figures"):
            curated["evidence"] = list(gold["evidence_figures"])
        if gold.get("figure_type"):
            curated["figure_type"] = gold["figure_type"]
        return curated


def _figure_type(figure: Figure) -> str:
    if figure.content_type == ContentType.TABLE:
        return "table"
    known = {value for value, _ in FIGURE_TYPES}
    return figure.figure_type if figure.figure_type in known else "other"
