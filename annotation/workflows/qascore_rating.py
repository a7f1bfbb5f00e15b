"""``qascore_rating``: QAEval's QAScore labels on a model response (shared/reference/qaeval.md §1-2).

One queue entry per candidate answer. The annotator extracts the short answer the response
commits to (QAExtract's rules: from the response only, as short as possible, list items
separated by ";") and scores it against the gold answer: 1 complete match, 0.5 partial
match, 0 mismatch or excess content. A response that commits to no answer is recorded as
an empty extraction with ``no_answer`` set, the convention §2 asks for.
"""

from __future__ import annotations

import re
from typing import Any

from django import forms

from annotation.models import Figure, ProjectItem
from annotation.workflows import register
from annotation.workflows.base import ItemView, LabelField, Payload, Shortcut, Workflow, WorkflowForm
from annotation.workflows.widgets import KeyedRadioSelect, keyed

SCORES = [("0", "0 · Mismatch or excess content"), ("0.5", "0.5 · Partial match"), ("1", "1 · Complete match")]
SCORE_VALUES = {"0": 0.0, "0.5": 0.5, "1": 1.0}
EXTRACT_LIMIT = 2000

_LEAD_INS = re.compile(
    r"^\s*(?:the\s+(?:final\s+|correct\s+)?answer\s+is|answer\s*:|in\s+summary,?|therefore,?|so,?)\s*",
    re.IGNORECASE,
)
_SENTENCE_END = re.compile(r"(?<=[.!?])\s+")


def simple_extraction(response: str) -> str:
    """A first guess for the annotator to edit: the response's first sentence, without a
    lead-in such as "The answer is" and without the final full stop."""
    text = " ".join(response.split())
    if not text:
        return ""
    first = _SENTENCE_END.split(text, maxsplit=1)[0]
    first = _LEAD_INS.sub("", first).strip()
    return first.rstrip(".").strip()


class ScoreField(forms.ChoiceField):
    """0 / 0.5 / 1, given as the form's strings or as JSON numbers."""

    def to_python(self, value: Any) -> str:
        if isinstance(value, int | float) and not isinstance(value, bool):
            for text, number in SCORE_VALUES.items():
                if float(value) == number:
                    return text
        return str(super().to_python(value))


class QAScoreForm(WorkflowForm):
    extracted_answer = forms.CharField(
        label="Extracted answer",
        required=False,
        max_length=EXTRACT_LIMIT,
        help_text="Taken from the response only, as short as possible; separate list items with ';'.",
        widget=forms.Textarea(attrs=keyed("x", {"rows": 2})),
    )
    no_answer = forms.BooleanField(
        label="The response commits to no answer", required=False, widget=forms.CheckboxInput(attrs=keyed("Shift+N"))
    )
    score = ScoreField(label="Score", choices=SCORES, widget=KeyedRadioSelect(keys={"0": "0", "0.5": "5", "1": "1"}))
    note = forms.CharField(
        label="Note (optional)", required=False, max_length=2000, widget=forms.Textarea(attrs=keyed("o", {"rows": 2}))
    )

    def clean(self) -> dict[str, Any]:
        data = super().clean() or {}
        extracted = (data.get("extracted_answer") or "").strip()
        if data.get("no_answer"):
            if extracted:
                self.add_error("extracted_answer", "Leave the extraction empty when the response gives no answer.")
            if data.get("score") not in (None, "0"):
                self.add_error("score", "A response with no answer scores 0.")
        elif not extracted:
            self.add_error("extracted_answer", "Write the extracted answer, or mark that the response gives none.")
        return data

    def to_payload(self) -> Payload:
        data = self.cleaned_data
        parts = [part.strip() for part in data["extracted_answer"].split(";")]
        return {
            "extracted_answer": "; ".join(part for part in parts if part),
            "no_answer": bool(data["no_answer"]),
            "score": SCORE_VALUES[data["score"]],
            "note": data["note"].strip(),
        }


@register
class QAScoreRating(Workflow):
    name = "qascore_rating"
    label = "QAScore rating (0 / 0.5 / 1)"
    description = "Extract the short answer from a model response and score it against the gold answer."
    payload_doc = """\
    {"extracted_answer": "taller and sharper", "no_answer": false, "score": 0.5, "note": ""}

`extracted_answer` is the short answer taken from the response only, list items separated by
";". When the response commits to no answer, leave it empty and set `no_answer` to true; such
a response scores 0. `score` is 0, 0.5 or 1; `note` is optional.
"""
    unit = "candidate"
    template_name = "annotation/workflows/qascore_rating.html"
    form_class = QAScoreForm
    label_fields = (
        LabelField("score", "Score", "ordinal", (0.0, 0.5, 1.0)),
        LabelField("no_answer", "No answer", "nominal", (False, True)),
        LabelField("extracted_answer", "Extracted answer", "text"),
    )
    shortcuts = (
        Shortcut("x", "Edit the extracted answer"),
        Shortcut("Shift+N", "The response gives no answer"),
        Shortcut("0 / 5 / 1", "Score 0 / 0.5 / 1"),
        Shortcut("o", "Write a note"),
    )
    default_guidelines = """\
# Scoring model answers (QAScore)

You see a question, its true answer and a model's response.

**First extract the short answer** the response commits to:

1. take it from the response only, adding nothing from outside;
2. keep it as short as possible, only the number where the answer is a number;
3. separate several answers with ";".

If the response gives no answer at all, leave the box empty and tick "no answer".
A warning appears when your extraction does not occur in the response.

**Then score the extracted answer against the true answer.** Do not grade reasoning,
style or length.

| Score | Meaning |
|---|---|
| **1** Complete match | The same answer; word-identical is not needed. |
| **0.5** Partial match | For lists: a strict subset of the true items, all correct, nothing wrong or extra. |
| **0** Mismatch or excess content | A wrong answer, a wrong item in a list, more items than asked, no answer. |

Numbers: accept a relative error of up to 5% of the true value, with or without the unit.
A true value of 0 needs exactly 0. Partial credit is flat: 1 of 3 and 2 of 3 both score 0.5.
Use 0.5 only for list answers.

## Worked examples

- Question: "How does the peak of the probability density change as kurtosis becomes
  higher?" True answer: "higher peak". Response: "…the peak becomes taller and sharper."
  Extract "taller and sharper"; score **1** (same meaning in other words).
- True answer "A; B; C", extraction "A; C": score **0.5**.
- True answer "A; B", extraction "A; B; D": score **0** (excess content).
- True answer "12.0", extraction "12.4 %": score **1** (within 5%, unit ignored).
- True answer "0", extraction "0.01": score **0**.
"""

    def item_view(self, project_item: ProjectItem) -> ItemView:
        item = project_item.item
        evidence = list(Figure.objects.filter(evidence_links__item=item).order_by("evidence_links__position"))
        return ItemView(project_item=project_item, extra={"evidence": evidence})

    def initial(self, view: ItemView) -> Payload:
        candidate = view.project_item.candidate
        response = candidate.text if candidate is not None else ""
        return {"extracted_answer": simple_extraction(response), "no_answer": False, "score": "", "note": ""}

    def form_data(self, view: ItemView, payload: Payload) -> dict[str, Any]:
        return {**payload, "score": ScoreField().to_python(payload.get("score"))}

    def curated(self, item_fields: dict[str, Any], gold: Payload) -> dict[str, Any] | None:
        """Every rated response stays; the gold's extraction and score become its labels, the
        ``extracted_answer`` and ``score`` of a QAScore record."""
        curated = dict(item_fields)
        no_answer = bool(gold.get("no_answer"))
        curated["extracted_answer"] = "" if no_answer else str(gold.get("extracted_answer") or "")
        curated["no_answer"] = no_answer
        curated["score"] = gold.get("score")
        return curated

    def warnings(self, view: ItemView, payload: Payload) -> list[str]:
        candidate = view.project_item.candidate
        response = " ".join((candidate.text if candidate is not None else "").split()).casefold()
        missing = [
            part.strip()
            for part in str(payload.get("extracted_answer", "")).split(";")
            if part.strip() and " ".join(part.split()).casefold() not in response
        ]
        if not missing:
            return []
        shown = ", ".join(repr(part) for part in missing)
        return [f"Not found in the response: {shown}. Extractions come from the response only."]
