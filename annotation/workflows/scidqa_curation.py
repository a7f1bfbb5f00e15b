"""``scidqa_curation``: SciDQA's curation of QA pairs extracted from OpenReview discussions
(shared/reference/scidqa.md §2-§6).

One form per extracted pair, in the order of the paper's pipeline: the relevance label
(relevant / irrelevant / ambiguous, §2); for a relevant pair the decontextualised question
and answer (§3), the references behind their placeholders r1, r2, … (§5), the
source-version tag (§4), the information sources (Tab. 2) and, when the paper has figures,
the evidence figures and tables (§6). Only relevant pairs enter the curated set.

What the SciDQA importer stores (annotation/importers/formats/scidqa.py): the paper's
``external_id`` is the OpenReview forum id (``pid``); the item's ``extra`` keeps the review
note id (``rid``) and every source column that has no item field, so a review excerpt
imported as a ``review_excerpt``, ``review`` or ``review_text`` column is shown beside the
pair. The released file has no such column, so the review thread link stands in for it.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping
from typing import Any, TypedDict

from django import forms
from django.core.exceptions import ValidationError

from annotation.models import AssignmentMode, Figure, Project, ProjectItem, QAItem
from annotation.workflows import register
from annotation.workflows.base import ItemView, LabelField, Payload, Shortcut, Workflow, WorkflowForm
from annotation.workflows.widgets import KeyedCheckboxSelectMultiple, KeyedRadioSelect, keyed

RELEVANCE = [("relevant", "Relevant"), ("irrelevant", "Irrelevant"), ("ambiguous", "Ambiguous")]
# §2.3, verbatim.
RELEVANCE_DEFINITIONS = [
    (
        "Relevant",
        "Questions referencing figures, tables, equations, specific sections, or lines, and inquiries "
        "requiring data from multiple papers were categorized as relevant.",
    ),
    (
        "Irrelevant",
        "questions asking for edits, summaries, or subjective judgments about the paper's quality, or those "
        "based on the authors' personal experiences, were classified as irrelevant.",
    ),
    (
        "Ambiguous",
        "Questions necessitating experimental validation for answers, and where it remained unclear whether "
        "the authors had conducted such experiments based on reviewer suggestion during reviewer-author "
        "discussion, were classified as ambiguous.",
    ),
]
VERSIONS = [
    ("initial", "Initial: the manuscript submitted before the deadline"),
    ("final", "Final: the camera-ready version (for a rejected paper, the last one submitted)"),
]
VERSION_RULE = (
    "Final when the authors' response says the revision added the answer; otherwise initial, "
    "the default when nothing is said."
)
INFORMATION_SOURCES = [
    ("figure", "Figure"),
    ("table", "Table"),
    ("equation", "Equation or symbols"),
    ("appendix", "Appendix or supplementary material"),
    ("section_text", "Section text"),
    ("other_papers", "Other paper(s)"),
]
# Keys 4 to 9: 1 to 3 are the relevance labels.
SOURCE_KEYS = {value: str(number) for number, (value, _) in enumerate(INFORMATION_SOURCES, 4)}
REVIEW_EXCERPT_COLUMNS = ("review_excerpt", "review", "review_text")
TEXT_LIMIT = 5000
NOTE_LIMIT = 2000
REFERENCE_LIMIT = 30
DESCRIPTION_LIMIT = 500

# A placeholder in a text: r1, r2, … as a word of its own ("[r1]", "(r2)", "r1-r3").
PLACEHOLDER_IN_TEXT = re.compile(r"(?<!\w)r([1-9][0-9]*)(?!\w)")
_REFERENCE_LINE = re.compile(r"\[?(?P<placeholder>[rR][0-9]+)(?!\w)\]?\s*(?:[:=\u2013\u2014-]\s*)?(?P<description>.*)")
_NAME = r"[A-Z][\w'\u2019-]*"
_YEAR = r"(?:19|20)[0-9]{2}[a-z]?"
# Citation markers the rewritten texts should no longer hold (§5): "[1]", "[3, 4]",
# "Smith et al., 2020", "(Smith et al., 2020)", "(Smith, 2020)", "Smith and Jones (2019)".
CITATION_MARKERS = [
    re.compile(r"\[[0-9]+(?:\s*[,;\u2013-]\s*[0-9]+)*\]"),
    re.compile(rf"\b{_NAME}\s+et\s+al\.?(?:,?\s*[\(\[]?{_YEAR}[\)\]]?)?"),
    re.compile(rf"\(\s*{_NAME}(?:\s+et\s+al\.?,?|(?:\s+(?:and|&)\s+{_NAME})?,)\s*{_YEAR}\s*\)"),
    re.compile(rf"\b{_NAME}(?:\s+(?:and|&)\s+{_NAME})?\s+[\(\[]{_YEAR}[\)\]]"),
]
# First and second person (§3: "in the third-person point of view"); "I" only as a capital.
_PERSONAL = re.compile(r"\b(?:we|our|ours|ourselves|you|your|yours|my)\b", re.IGNORECASE)
# "I" as a word, unless it numbers something ("Table I", "Section I").
_CAPITAL_I = re.compile(r"(?<!\w)(?P<before>\w+\.?\s+)?I\b(?!\.)")
_NUMBERED = frozenset(
    {"table", "section", "figure", "fig.", "appendix", "part", "phase", "stage", "type", "case", "step"}
)


class ReferenceRow(TypedDict):
    placeholder: str
    description: str


# Text helpers ------------------------------------------------------------------------------


def normalise_text(text: str) -> str:
    """Browsers post textarea line breaks as CRLF; stored texts use LF and no outer spaces."""
    return text.replace("\r\n", "\n").replace("\r", "\n").strip()


def placeholders_in(text: str) -> set[str]:
    """The placeholders a text cites: {"r1", "r3"} for "as in [r1] and r3"."""
    return {f"r{number}" for number in PLACEHOLDER_IN_TEXT.findall(text)}


def citation_markers(text: str) -> list[str]:
    """Citation markers left in a text, in order of appearance, without repeats or overlaps."""
    spans: list[tuple[int, int]] = []
    for pattern in CITATION_MARKERS:
        spans.extend(match.span() for match in pattern.finditer(text))
    found: list[str] = []
    end = -1
    for start, stop in sorted(spans, key=lambda span: (span[0], -span[1])):
        if start < end:
            continue
        end = stop
        marker = text[start:stop]
        if marker not in found:
            found.append(marker)
    return found


def personal_words(text: str) -> list[str]:
    """First- and second-person words in a text, lower-cased, in order, without repeats."""
    words = [match.group(0).lower() for match in _PERSONAL.finditer(text)]
    words += ["I" for match in _CAPITAL_I.finditer(text) if (match["before"] or "").strip().lower() not in _NUMBERED]
    return list(dict.fromkeys(words))


def reference_number(placeholder: str) -> int:
    return int(placeholder[1:])


def with_reference_list(text: str, references: Iterable[ReferenceRow]) -> str:
    """The text followed by the references it cites, as SciDQA lists them at the end of the
    question and of the answer (§5); the text alone when it cites none."""
    cited = placeholders_in(text)
    lines = [f"{row['placeholder']}: {row['description']}" for row in references if row["placeholder"] in cited]
    if not lines:
        return text
    return text + "\n\nReferences:\n" + "\n".join(lines)


# The references field -----------------------------------------------------------------------


class ReferencesTextarea(forms.Textarea):
    """One reference a line, "r1: short description"; the workbench script turns it into an
    editable list of rows and writes the rows back here."""

    def format_value(self, value: Any) -> str | None:
        if isinstance(value, list):
            return "\n".join(_reference_line(row) for row in value)
        return super().format_value(value)


def _reference_line(row: Any) -> str:
    if isinstance(row, Mapping):
        return f"{row.get('placeholder', '')}: {row.get('description', '')}"
    return str(row)


class ReferencesField(forms.Field):
    """The references as rows, from the form's text (one a line) or from a JSON list of
    {"placeholder": "r1", "description": "…"} objects; numbered r1, r2, … without gaps."""

    widget = ReferencesTextarea

    def to_python(self, value: Any) -> list[ReferenceRow]:
        if value is None or value == "":
            return []
        if isinstance(value, str):
            rows = self._rows_from_text(value)
        elif isinstance(value, list):
            rows = [self._row_from_json(entry, index) for index, entry in enumerate(value, 1)]
        else:
            raise ValidationError("Send the references as a list of {placeholder, description} objects.")
        return self._checked(rows)

    def _rows_from_text(self, text: str) -> list[ReferenceRow]:
        rows = []
        problems = []
        lines = normalise_text(text).split("\n")
        for number, line in enumerate(lines, 1):
            line = line.strip()
            if not line:
                continue
            match = _REFERENCE_LINE.fullmatch(line)
            if match is None:
                problems.append(f"Line {number} does not start with a placeholder: write 'r1: short description'.")
                continue
            rows.append(_row(match["placeholder"], match["description"]))
        if problems:
            raise ValidationError(problems)
        return rows

    def _row_from_json(self, entry: Any, index: int) -> ReferenceRow:
        if not isinstance(entry, Mapping):
            raise ValidationError(f"Reference {index} must be an object with a placeholder and a description.")
        placeholder, description = entry.get("placeholder"), entry.get("description")
        if not isinstance(placeholder, str) or not isinstance(description, str):
            raise ValidationError(f"Reference {index} needs a placeholder and a description, both text.")
        if "\n" in description.strip():
            raise ValidationError(f"Reference {index}: keep the description on one line.")
        return _row(placeholder, description)

    def _checked(self, rows: list[ReferenceRow]) -> list[ReferenceRow]:
        problems = []
        if len(rows) > REFERENCE_LIMIT:
            problems.append(f"At most {REFERENCE_LIMIT} references.")
        seen: set[str] = set()
        for row in rows:
            placeholder = row["placeholder"]
            if not re.fullmatch(r"r[1-9][0-9]*", placeholder):
                problems.append(f"'{placeholder}' is not a placeholder: use r1, r2, … for every reference.")
                continue
            if placeholder in seen:
                problems.append(f"{placeholder} is listed twice; give each reference its own placeholder.")
            seen.add(placeholder)
            if not row["description"]:
                problems.append(f"{placeholder} needs a short description (authors, year, title).")
            elif len(row["description"]) > DESCRIPTION_LIMIT:
                problems.append(f"Keep the description of {placeholder} under {DESCRIPTION_LIMIT} characters.")
        if not problems:
            expected = {f"r{number}" for number in range(1, len(seen) + 1)}
            missing = sorted(expected - seen, key=reference_number)
            if missing:
                problems.append(f"Number the references r1, r2, … without gaps: {', '.join(missing)} is missing.")
        if problems:
            raise ValidationError(problems)
        return sorted(rows, key=lambda row: reference_number(row["placeholder"]))


def _row(placeholder: str, description: str) -> ReferenceRow:
    return {"placeholder": placeholder.strip().lower(), "description": " ".join(description.split())}


# The form ----------------------------------------------------------------------------------


class ScidqaCurationForm(WorkflowForm):
    relevance = forms.ChoiceField(
        label="Is the pair relevant for SciDQA?",
        choices=RELEVANCE,
        help_text="The definitions are beside the pair. Only relevant pairs enter the dataset; "
        "the fields below are for relevant pairs only.",
        widget=KeyedRadioSelect(keys={"relevant": "1", "irrelevant": "2", "ambiguous": "3"}),
    )
    rewritten_question = forms.CharField(
        label="Rewritten question",
        required=False,
        max_length=TEXT_LIMIT,
        help_text="In the third person and self-contained: add the context from the review that the question needs.",
        widget=forms.Textarea(attrs=keyed("q", {"rows": 3})),
    )
    rewritten_answer = forms.CharField(
        label="Rewritten answer",
        required=False,
        max_length=TEXT_LIMIT,
        help_text="In the third person ('the authors …'), as the paper's reasoning, not a personal opinion.",
        widget=forms.Textarea(attrs=keyed("a", {"rows": 4})),
    )
    references = ReferencesField(
        label="References",
        required=False,
        help_text="Replace each citation marker in the texts with a placeholder r1, r2, … and describe it here, "
        "one a line: 'r1: Smith et al., 2020, Deep sets'.",
        widget=ReferencesTextarea(attrs=keyed("r", {"rows": 3, "data-references": "on"})),
    )
    version = forms.ChoiceField(
        label="Source version",
        choices=VERSIONS,
        required=False,
        help_text=VERSION_RULE,
        widget=KeyedRadioSelect(keys={"initial": "i", "final": "f"}),
    )
    information_sources = forms.MultipleChoiceField(
        label="Where does the answer come from?",
        choices=INFORMATION_SOURCES,
        required=False,
        help_text="Tick every source the answer needs.",
        widget=KeyedCheckboxSelectMultiple(keys=SOURCE_KEYS),
    )
    evidence_figures = forms.MultipleChoiceField(
        label="Evidence figures and tables",
        required=False,
        widget=KeyedCheckboxSelectMultiple(keys={}),
    )
    note = forms.CharField(
        label="Note (optional)",
        required=False,
        max_length=NOTE_LIMIT,
        widget=forms.Textarea(attrs=keyed("o", {"rows": 2})),
    )

    def __init__(self, *args: Any, view: ItemView, **kwargs: Any) -> None:
        super().__init__(*args, view=view, **kwargs)
        figures: list[Figure] = view.extra["figures"]
        if not figures:
            del self.fields["evidence_figures"]
            return
        evidence_field = self.fields["evidence_figures"]
        assert isinstance(evidence_field, forms.MultipleChoiceField)
        evidence_field.choices = [(f.file_name, f.file_name) for f in figures]
        # Shift+1..9 toggles the first nine, in the order of the thumbnails.
        evidence_widget = evidence_field.widget
        assert isinstance(evidence_widget, KeyedCheckboxSelectMultiple)
        evidence_widget.option_keys = {f.file_name: f"Shift+{n}" for n, f in enumerate(figures[:9], 1)}

    def clean(self) -> dict[str, Any]:
        data = super().clean() or {}
        relevance = data.get("relevance")
        if relevance == "relevant":
            self._check_relevant(data)
        elif relevance:
            self._check_not_relevant(data, "An irrelevant pair" if relevance == "irrelevant" else "An ambiguous pair")
        return data

    def _check_relevant(self, data: dict[str, Any]) -> None:
        question = normalise_text(data.get("rewritten_question") or "")
        answer = normalise_text(data.get("rewritten_answer") or "")
        if not question:
            self.add_error("rewritten_question", "A relevant pair needs the rewritten question.")
        if not answer:
            self.add_error("rewritten_answer", "A relevant pair needs the rewritten answer.")
        if not data.get("version"):
            self.add_error(
                "version",
                "Tag the source version of a relevant pair: final if the revision added the answer, else initial.",
            )
        if not data.get("information_sources"):
            self.add_error(
                "information_sources",
                "Tick at least one information source (section text when the answer is in the running text).",
            )
        if "references" in data:
            self._check_placeholders(data["references"], question + "\n" + answer)

    def _check_placeholders(self, references: list[ReferenceRow], texts: str) -> None:
        used = placeholders_in(texts)
        described = {row["placeholder"] for row in references}
        undescribed = sorted(used - described, key=reference_number)
        unused = sorted(described - used, key=reference_number)
        if undescribed:
            self.add_error(
                "references",
                f"Describe every placeholder the rewritten texts use: {', '.join(undescribed)} "
                f"{'has' if len(undescribed) == 1 else 'have'} no description.",
            )
        if unused:
            self.add_error(
                "references",
                f"{', '.join(unused)} {'is' if len(unused) == 1 else 'are'} described but not used in the "
                "rewritten question or answer: cite it there or remove it.",
            )

    def _check_not_relevant(self, data: dict[str, Any], pair: str) -> None:
        item = self.view.project_item.item
        for name, original, what in (
            ("rewritten_question", item.question, "question"),
            ("rewritten_answer", item.answer, "answer"),
        ):
            text = normalise_text(data.get(name) or "")
            if text and text != normalise_text(original):
                self.add_error(
                    name,
                    f"{pair} carries no rewrite: undo your changes to the {what} (the diff shows them) "
                    "or mark the pair relevant.",
                )
        if data.get("references"):
            self.add_error("references", f"{pair} carries no references: remove them or mark the pair relevant.")

    def to_payload(self) -> Payload:
        data = self.cleaned_data
        relevant = data["relevance"] == "relevant"
        sources = set(data["information_sources"])
        chosen = set(data.get("evidence_figures") or [])
        figures: list[Figure] = self.view.extra["figures"]
        return {
            "relevance": data["relevance"],
            "rewritten_question": normalise_text(data["rewritten_question"]) if relevant else "",
            "rewritten_answer": normalise_text(data["rewritten_answer"]) if relevant else "",
            "references": list(data["references"]) if relevant else [],
            # Tags and sources describe a pair that enters the dataset; other pairs carry none.
            "version": data["version"] if relevant else "",
            "information_sources": [value for value, _ in INFORMATION_SOURCES if value in sources] if relevant else [],
            # In thumbnail order, so equal sets are equal lists.
            "evidence_figures": [f.file_name for f in figures if f.file_name in chosen] if relevant else [],
            "note": normalise_text(data["note"]),
        }


# Label fields ------------------------------------------------------------------------------


class RelevantOnlyField(LabelField):
    """A label that exists only for relevant pairs: None (not rated) for the others, so
    agreement on it is measured over the pairs both annotators kept."""

    def value(self, payload: Payload) -> Any:
        return payload.get(self.name) if payload.get("relevance") == "relevant" else None


class IncludedField(LabelField):
    """Include or exclude. Half of the pilot's disagreements were one annotator using
    "ambiguous" as a shortcut without disagreeing on inclusion (§2), so agreement is also
    measured on this binary label."""

    def value(self, payload: Payload) -> Any:
        relevance = payload.get("relevance")
        return None if not relevance else relevance == "relevant"


# The workflow ------------------------------------------------------------------------------


@register
class ScidqaCuration(Workflow):
    name = "scidqa_curation"
    label = "SciDQA curation (relevance, rewrite, references, version)"
    description = (
        "Judge QA pairs extracted from OpenReview discussions and turn the relevant ones into "
        "self-contained, third-person QA with references and a source-version tag, as for SciDQA."
    )
    template_name = "annotation/workflows/scidqa_curation.html"
    form_class = ScidqaCurationForm
    # SciDQA gave all questions of one paper to the same annotator (App. A.1).
    default_assignment_mode = AssignmentMode.BY_PAPER
    label_fields = (
        LabelField("relevance", "Relevance", "nominal", tuple(value for value, _ in RELEVANCE)),
        IncludedField("included", "Included", "nominal", (True, False)),
        RelevantOnlyField("version", "Source version", "nominal", tuple(value for value, _ in VERSIONS)),
        RelevantOnlyField(
            "information_sources", "Information sources", "set", tuple(value for value, _ in INFORMATION_SOURCES)
        ),
        RelevantOnlyField("rewritten_question", "Rewritten question", "text"),
        RelevantOnlyField("rewritten_answer", "Rewritten answer", "text"),
    )
    shortcuts = (
        Shortcut("1 / 2 / 3", "Relevant / irrelevant / ambiguous"),
        Shortcut("q / a", "Edit the rewritten question / answer"),
        Shortcut("r", "Go to the references (adds the first one)"),
        Shortcut("Shift+R", "Add a reference"),
        Shortcut("Enter in a reference", "Add a reference below it"),
        Shortcut("Backspace in an empty description", "Remove that reference"),
        Shortcut("↑ / ↓ in a reference", "Previous / next reference"),
        Shortcut("i / f", "Source version: initial / final"),
        Shortcut("4 to 9", "Toggle a source: figure, table, equation, appendix, section text, other papers"),
        Shortcut("Shift+1 to 9", "Toggle an evidence figure or table"),
        Shortcut("o", "Write a note"),
    )
    default_guidelines = """\
# Curating reviewer-author QA pairs (SciDQA)

Each pair was extracted by a language model from a reviewer-author discussion on OpenReview.
You see the paper's title, venue, year and decision, a link to its forum and review thread,
the review text when it was imported, and the extracted question and answer. Read the review
thread when the pair needs context.

## 1. Relevance

The task "selects information-seeking questions, whose answers are identifiable within the
research paper text".

- **Relevant**: "Questions referencing figures, tables, equations, specific sections, or
  lines, and inquiries requiring data from multiple papers were categorized as relevant."
- **Irrelevant**: "questions asking for edits, summaries, or subjective judgments about the
  paper's quality, or those based on the authors' personal experiences, were classified as
  irrelevant."
- **Ambiguous**: "Questions necessitating experimental validation for answers, and where it
  remained unclear whether the authors had conducted such experiments based on reviewer
  suggestion during reviewer-author discussion, were classified as ambiguous."

Use *ambiguous* only when relevance truly cannot be decided, not as a shortcut. Only relevant
pairs enter the dataset; irrelevant and ambiguous pairs carry no rewrite and no references.

Examples from the paper (Tab. 6):

- relevant: "How is the expectation of TCE algorithm computed in Equation 18?"
- relevant: "In section 3.4.1, is it possible to apply ReMERT to non-episodic or continuing task?"
- irrelevant: "Can the inversion method by Chen et al. 2022 be used to improve the latency?",
  answered "We believe that this may be possible, however it will require further analysis."
- irrelevant: "Can you correct the typos in Section 3.4?"
- ambiguous: "Why don't the authors compare to PINNs?", answered "PINNs are typically
  employed to retrieve individual solutions, not learn distributions over data sets. …"

## 2. Rewrite a relevant pair (decontextualisation)

The boxes start from the extracted texts; the diff beside the pair shows your changes.

- Rewrite the question and the answer "in the third-person point of view": the question is
  "a factual question seeking information about the author's reasoning in the paper", not a
  request for an opinion ("Why do the authors …", "The authors …", never "you" or "we").
- "Add contextual information to the questions where the question is incomplete or
  incomprehensible without contextual information present in the review text."

## 3. References

Replace every citation marker ("[12]", "Chen et al. 2022", "(Smith et al., 2020)") with a
placeholder **r1, r2, …**, numbered in order without gaps, and describe each placeholder in
the reference list (authors, year, title). Every placeholder used in the texts needs a
description and every description must be used. The curated texts end with the list of the
references they cite.

## 4. Source version

- **Initial**: "the last manuscript submitted prior to the conference deadline".
- **Final**: "the final manuscript, known as the camera-ready version". For rejected papers
  "the last submitted manuscript is considered the final version".

"If author responses indicate additions in a revision, the final version is marked as the
source document. If no specific information is given, the initial version is defaulted as
the source." Prefer initial when the revision merely states the answer explicitly; prefer
final when the answer was absent from the initial manuscript.

## 5. Information sources and evidence

Tick every kind of source the answer needs (several may apply): figure, table, equation or
symbols, appendix or supplementary material, section text, other paper(s). When the paper's
figures and tables were imported, pick those that hold the evidence.
"""

    def item_view(self, project_item: ProjectItem) -> ItemView:
        item = project_item.item
        figures: list[Figure] = []
        if item.paper_id is not None:
            figures = list(Figure.objects.filter(paper_id=item.paper_id).order_by("position", "pk"))
        return ItemView(
            project_item=project_item,
            extra={
                "figures": figures,
                "review_excerpt": review_excerpt(item),
                "review_id": _text_value(item.extra, "rid"),
                "relevance_definitions": RELEVANCE_DEFINITIONS,
                "version_rule": VERSION_RULE,
            },
        )

    def initial(self, view: ItemView) -> Payload:
        item = view.project_item.item
        return {
            "relevance": "",
            "rewritten_question": normalise_text(item.question),
            "rewritten_answer": normalise_text(item.answer),
            "references": [],
            "version": "",
            "information_sources": [],
            "evidence_figures": [],
            "note": "",
        }

    def form_data(self, view: ItemView, payload: Payload) -> dict[str, Any]:
        # A pair that is not relevant stores no rewrite, and a payload may leave a text out
        # (unchanged): the boxes then start from the original. A relevant pair's emptied box
        # stays empty, so the rule that it needs a rewrite can say so.
        item = view.project_item.item
        data = dict(payload)
        for name, original in (("rewritten_question", item.question), ("rewritten_answer", item.answer)):
            if name not in payload or (payload.get("relevance") != "relevant" and not payload[name]):
                data[name] = normalise_text(original)
        return data

    def warnings(self, view: ItemView, payload: Payload) -> list[str]:
        if payload.get("relevance") != "relevant":
            return []
        found = []
        for name, what in (("rewritten_question", "question"), ("rewritten_answer", "answer")):
            text = str(payload.get(name) or "")
            markers = citation_markers(text)
            if markers:
                shown = ", ".join(f"'{marker}'" for marker in markers)
                found.append(
                    f"Citation markers left in the rewritten {what}: {shown}. Replace each with a placeholder "
                    "(r1, r2, …) and describe it under References."
                )
            words = personal_words(text)
            if words:
                shown = ", ".join(f"'{word}'" for word in words)
                found.append(
                    f"The rewritten {what} speaks in the first or second person ({shown}): "
                    "rewrite it in the third person ('the authors …')."
                )
        sources = payload.get("information_sources") or []
        figures: list[Figure] = view.extra["figures"]
        if figures and {"figure", "table"} & set(sources) and not payload.get("evidence_figures"):
            found.append("A figure or table is a source of the answer: pick it among the evidence figures and tables.")
        return found

    def gold_fields(self, payload: Payload, project: Project | None = None) -> Payload:
        return {
            "relevance": payload.get("relevance"),
            "rewritten_question": payload.get("rewritten_question", ""),
            "rewritten_answer": payload.get("rewritten_answer", ""),
            "references": payload.get("references", []),
            "version": payload.get("version", ""),
            "information_sources": payload.get("information_sources", []),
            "evidence_figures": payload.get("evidence_figures", []),
        }

    def curated(self, item_fields: dict[str, Any], gold: Payload) -> dict[str, Any] | None:
        """Relevant pairs only, with the rewrites applied and, as in the released data, the
        references each text cites listed at its end; ``version`` is the canonical tag
        (initial / final) the importer also stores."""
        if gold.get("relevance") != "relevant":
            return None
        references: list[ReferenceRow] = list(gold.get("references") or [])
        curated = dict(item_fields)
        question = gold.get("rewritten_question") or curated["question"]
        answer = gold.get("rewritten_answer") or curated["answer"]
        curated["question"] = with_reference_list(question, references)
        curated["answer"] = with_reference_list(answer, references)
        curated["references"] = [dict(row) for row in references]
        if gold.get("version"):
            curated["version"] = gold["version"]
        curated["information_sources"] = list(gold.get("information_sources") or [])
        if gold.get("evidence_figures"):
            curated["evidence"] = list(gold["evidence_figures"])
        return curated


def review_excerpt(item: QAItem) -> str:
    """The review text imported with the pair, if the source had a column for it."""
    for column in REVIEW_EXCERPT_COLUMNS:
        text = _text_value(item.extra, column)
        if text:
            return text
    return ""


def _text_value(extra: Any, key: str) -> str:
    value = extra.get(key) if isinstance(extra, Mapping) else None
    return value.strip() if isinstance(value, str) else ""
