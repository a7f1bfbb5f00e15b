"""``m3sciqa_locality``: writing M3SciQA's locality-specific questions (shared/reference/m3sciqa.md §1).

The unit of work is one QA item that names an anchor paper and one of its figures or tables:
in an M3SciQA dataset, a line of ``locality.jsonl`` (split ``locality``). Each such line is
one writing slot on its anchor's image; the released data has 300 over 83 images, so a
project over the locality split asks for as many questions per image as the benchmark has.
The item's imported question, answer and gold are not shown: the writer starts from the
image and the anchor's reference cluster, as the paper's annotators did.

The writer records the question, its locality reasoning type (Table 6), the direct answer
(the entity as the image prints it) and the gold reference paper, which must be a member
of the anchor's cluster; the form checks that against the cluster in the database, never
against what the browser sent. The writer also confirms that the question needs the image.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from django import forms

from annotation.importers.formats.m3sciqa import arxiv_url
from annotation.models import Figure, Paper, Project, ProjectItem
from annotation.workflows import register
from annotation.workflows.base import ItemView, LabelField, Payload, Shortcut, Workflow, WorkflowForm
from annotation.workflows.widgets import KeyedRadioSelect, keyed

# Table 6 of the paper, definitions verbatim; the names are the ones the importer stores.
LOCALITY_TYPES: tuple[tuple[str, str, str, str], ...] = (
    # (name, shortcut, definition, the paper's example from Fig. 6)
    (
        "Comparison",
        "c",
        "It focuses on evaluating and contrasting information presented in tables, figures, or other data "
        "formats. To answer questions of this type, one must analyze and compare specific subjects or variables "
        "within the given dataset.",
        "Which large language model achieves a lower HVI score than OPT but a higher HVI score than Alpaca?",
    ),
    (
        "Data Extraction",
        "d",
        "It directly retrieves specific information from a table or figure. This approach focuses on "
        "pinpointing exact data points or details.",
        "Which model achieves a score of 21.073 in 10-shot prompting?",
    ),
    (
        "Location",
        "l",
        "It is centered on pinpointing spatial or positional information from a table or figure. This involves "
        "identifying either relative or absolute locations, such as the placement of items in a figure or row "
        "information in a table.",
        "Which method is shown in the first row of the table?",
    ),
    (
        "Visual Understanding",
        "v",
        "It emphasizes understanding visual information from the figure, such as colors, shapes, and marker "
        "types. This approach involves analyzing and extracting visual information.",
        "What method is demonstrated by the solid lavender line?",
    ),
)
LOCALITY_TYPE_NAMES = tuple(name for name, _, _, _ in LOCALITY_TYPES)
QUESTION_LIMIT = 1000
ANSWER_LIMIT = 300


def type_table(headers: tuple[str, ...], rows: Iterable[tuple[str, ...]]) -> str:
    """A Markdown table of reasoning types, the name in bold (the guidelines show the definitions)."""
    lines = ["| " + " | ".join(headers) + " |", "|" + "---|" * len(headers)]
    lines += ["| " + " | ".join([f"**{name}**", *rest]) + " |" for name, *rest in rows]
    return "\n".join(lines)


LOCALITY_TYPE_TABLE = type_table(
    ("Type", "Definition", "Example"), ((name, definition, example) for name, _, definition, example in LOCALITY_TYPES)
)


def reference_label(paper: Paper, limit: int = 80) -> str:
    """How a reference paper reads in a choice list: its arXiv id, and its title when imported."""
    title = " ".join(paper.title.split())
    if not title:
        return paper.external_id
    if len(title) > limit:
        title = title[: limit - 1] + "…"
    return f"{paper.external_id} — {title}"


def cluster_references(item_dataset_id: int, anchor_id: int | None) -> list[Paper]:
    """The reference papers of the anchor's cluster in the item's dataset, in source order (one query)."""
    if anchor_id is None:
        return []
    return list(
        Paper.objects.filter(
            cluster_memberships__cluster__dataset_id=item_dataset_id,
            cluster_memberships__cluster__anchor_id=anchor_id,
        ).order_by("position", "external_id")
    )


def item_figures(project_item: ProjectItem) -> list[Figure]:
    """The item's figures or tables in evidence order (one query); the first is the anchor image."""
    return list(
        Figure.objects.filter(evidence_links__item_id=project_item.item_id).order_by("evidence_links__position", "pk")
    )


def _normalised(text: str) -> str:
    return " ".join(text.split())


_GUIDELINES_TEMPLATE = """\
# Writing locality-specific questions (M3SciQA)

You see one figure or table of an **anchor paper** and the papers it cites (its reference
cluster). Write a **locality-specific question** about the image whose answer is one entity
in it, for example a model or a method, that leads to exactly **one cited reference paper**.

The paper's instructions to its annotators: find figures or tables that contain comparative
information with one of the reasoning types below, find the reference paper in the figure or
table, and write the locality-specific question; fill in its reasoning type and the
"direct answer" to it.

## What you record

1. **The question**, about this image only. It must need the image: tick the confirmation
   only if the question cannot be answered without looking at the figure or table.
2. **The reasoning type**, one of the four below (use the definitions, not your own sense of
   the words; they were fixed to limit annotator bias).
3. **The direct answer**: the entity as printed in the image, e.g. "GPT-4".
4. **The gold reference paper**: "The ground truth answer to each locality-specific question
   is the single reference paper to which the locality-specific question directly refers."
   It must be in the anchor paper's cluster; search the list by arXiv id, title or abstract.
   Several questions may share a reference paper.

Do not name the answer in the question: the question points to the entity, it does not say it.

## Reasoning types (Table 6)

{types}

Someone else validates every question you write; you never validate your own.
"""


class LocalityForm(WorkflowForm):
    question = forms.CharField(
        label="Locality question",
        required=False,
        max_length=QUESTION_LIMIT,
        help_text="Answering it must single out one entity in the image, and through it one cited paper.",
        widget=forms.Textarea(attrs=keyed("q", {"rows": 3})),
    )
    reasoning_type = forms.ChoiceField(
        label="Reasoning type",
        required=False,
        choices=[(name, name) for name in LOCALITY_TYPE_NAMES],
        help_text="The definitions are beside the image.",
        widget=KeyedRadioSelect(keys={name: key for name, key, _, _ in LOCALITY_TYPES}),
    )
    answer = forms.CharField(
        label="Direct answer",
        required=False,
        max_length=ANSWER_LIMIT,
        help_text="The entity as the figure or table prints it, e.g. GPT-4.",
        widget=forms.TextInput(attrs=keyed("a")),
    )
    gold_reference = forms.ChoiceField(
        label="Gold reference paper",
        required=False,
        help_text="The one cited paper the question refers to. Press f to search the reference list.",
        error_messages={"invalid_choice": "%(value)s is not a paper of this anchor paper's reference cluster."},
        widget=forms.Select(attrs=keyed("r")),
    )
    needs_image = forms.BooleanField(
        label="The question cannot be answered without the image",
        required=False,
        widget=forms.CheckboxInput(attrs=keyed("i")),
    )

    def __init__(self, *args: Any, view: ItemView, **kwargs: Any) -> None:
        super().__init__(*args, view=view, **kwargs)
        references: list[Paper] = view.extra["references"]
        gold_field = self.fields["gold_reference"]
        assert isinstance(gold_field, forms.ChoiceField)
        # The choices come from the database: a posted id outside the cluster fails as invalid_choice.
        gold_field.choices = [("", "—")] + [(paper.external_id, reference_label(paper)) for paper in references]

    def clean(self) -> dict[str, Any]:
        data = super().clean() or {}
        if not self.view.extra["references"]:
            self.add_error(None, "This anchor paper has no reference cluster in the dataset, so no gold can be picked.")
        if not _normalised(data.get("question") or ""):
            self.add_error("question", "Write the locality question.")
        if not data.get("reasoning_type") and "reasoning_type" not in self.errors:
            self.add_error("reasoning_type", "Choose the reasoning type the question needs.")
        if not _normalised(data.get("answer") or ""):
            self.add_error("answer", "Write the direct answer: the entity as the figure or table shows it.")
        if not data.get("gold_reference") and "gold_reference" not in self.errors:
            self.add_error("gold_reference", "Pick the gold reference paper from the anchor paper's cluster.")
        if not data.get("needs_image"):
            self.add_error("needs_image", "Confirm that the question cannot be answered without the figure or table.")
        return data

    def to_payload(self) -> Payload:
        data = self.cleaned_data
        return {
            "question": _normalised(data["question"]),
            "reasoning_type": data["reasoning_type"],
            "answer": _normalised(data["answer"]),
            "gold_reference": data["gold_reference"],
            "needs_image": True,
        }


@register
class M3sciqaLocality(Workflow):
    name = "m3sciqa_locality"
    label = "M3SciQA locality question writing"
    description = (
        "Write a locality-specific question about an anchor paper's figure or table, with its reasoning type, "
        "direct answer and gold reference paper from the anchor's cluster."
    )
    template_name = "annotation/workflows/m3sciqa_locality.html"
    form_class = LocalityForm
    label_fields = (
        LabelField("reasoning_type", "Reasoning type", "nominal", LOCALITY_TYPE_NAMES),
        LabelField("gold_reference", "Gold reference paper", "nominal"),
    )
    shortcuts = (
        Shortcut("q", "Write the locality question"),
        Shortcut("c / d / l / v", "Reasoning type: Comparison / Data Extraction / Location / Visual Understanding"),
        Shortcut("a", "Write the direct answer"),
        Shortcut("f", "Search the reference list; Enter picks the highlighted paper, arrows move"),
        Shortcut("r", "Choose the gold reference from the list box"),
        Shortcut("i", "Confirm the question needs the image"),
    )
    lead_actions = (("Publish questions for validation", "m3sciqa_locality_publish"),)
    hides_item_text = True
    default_guidelines = _GUIDELINES_TEMPLATE.replace("{types}", LOCALITY_TYPE_TABLE)

    def item_view(self, project_item: ProjectItem) -> ItemView:
        item = project_item.item
        anchor = item.paper
        figures = item_figures(project_item)
        references = cluster_references(item.dataset_id, item.paper_id)
        return ItemView(
            project_item=project_item,
            extra={
                "anchor": anchor,
                "anchor_url": arxiv_url(anchor.external_id) if anchor is not None else "",
                "figure": figures[0] if figures else None,
                "references": references,
                "reference_rows": [
                    {
                        "paper": paper,
                        "url": arxiv_url(paper.external_id),
                        "abstract": str(paper.extra.get("abstract", "") or ""),
                    }
                    for paper in references
                ],
                "types": [
                    {"name": name, "key": key, "definition": definition, "example": example}
                    for name, key, definition, example in LOCALITY_TYPES
                ],
            },
        )

    def initial(self, view: ItemView) -> Payload:
        return {"question": "", "reasoning_type": "", "answer": "", "gold_reference": "", "needs_image": False}

    def warnings(self, view: ItemView, payload: Payload) -> list[str]:
        question = _normalised(str(payload.get("question") or ""))
        answer = _normalised(str(payload.get("answer") or ""))
        found = []
        if question and answer and answer.casefold() in question.casefold():
            found.append(
                "The direct answer appears in the question: the question should point to the entity, not name it."
            )
        if question and not question.endswith("?"):
            found.append("The question does not end with a question mark.")
        return found

    def gold_fields(self, payload: Payload, project: Project | None = None) -> Payload:
        return {
            "question": payload.get("question", ""),
            "reasoning_type": payload.get("reasoning_type"),
            "answer": payload.get("answer", ""),
            "gold_reference": payload.get("gold_reference"),
            "needs_image": bool(payload.get("needs_image")),
        }

    def curated(self, item_fields: dict[str, Any], gold: Payload) -> dict[str, Any] | None:
        """The written question in place of the slot's text, with the M3SciQA locality keys
        the exporter writes: the gold reference and the named reasoning type."""
        if not gold.get("question") or not gold.get("gold_reference"):
            return None
        return {
            **item_fields,
            "question": gold["question"],
            "answer": gold.get("answer", ""),
            "reference_arxiv_id": gold["gold_reference"],
            "anchor_reasoning_type": gold.get("reasoning_type"),
        }
