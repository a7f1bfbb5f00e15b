"""The dataset card (README.md) of a gold export, from what the snapshot froze.

It says where the data comes from (each source dataset with its licence and attribution),
what is in it (items per split, kept and dropped, and the gold labels per split), how far the
annotators agreed before adjudication (the agreement engine's figures on the snapshot's raw
labels), under which guideline versions they worked, and how the export was made. Built only
from frozen values, so a snapshot's card never changes.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from reviews.exports.records import Json
from reviews.exports.writers import WrittenFile


@dataclass(frozen=True, slots=True)
class CardData:
    title: str
    version: int
    created_on: str  # ISO date
    projects: list[Json]  # id, name, workflow
    sources: list[Json]  # name, source_format, licence, attribution, source_url, description
    parameters: Json  # formats, split rule, raw labels, item agreement, withheld splits
    counts: Json  # see SplitCounts.as_json: {"splits": [...], "labels": [...]}
    agreement: Json  # {"resamples": n, "seed": n, "fields": [...]}
    guidelines: list[Json]  # project, version, note, created_on, annotations


def cell(value: Any) -> str:
    """Text safe inside a Markdown table cell: no line breaks, pipes escaped."""
    text = " ".join(str(value).split())
    return text.replace("\\", "\\\\").replace("|", "\\|")


def _figure(value: float | None, reason: str | None = None) -> str:
    if value is None:
        return f"undefined ({cell(reason)})" if reason else "—"
    return f"{value:.3f}"


def _interval(found: list[float] | None, reason: str | None = None) -> str:
    if found:
        return f"[{found[0]:.3f}, {found[1]:.3f}]"
    return f"undefined ({cell(reason)})" if reason else "—"


def build_card(data: CardData, files: Sequence[WrittenFile]) -> str:
    parts = [
        f"# {cell(data.title)}\n",
        f"Gold snapshot version {data.version}, captured {data.created_on} with Quire from the adjudicated "
        f"items of {_projects_phrase(data.projects)}. Each record is the reviewers' final decision on one item, "
        "with the annotations it was decided from.\n",
        _sources_section(data.sources),
        _counts_section(data.counts),
        _labels_section(data.counts),
        _agreement_section(data.agreement),
        _guidelines_section(data.guidelines),
        _parameters_section(data.parameters),
        _files_section(files),
    ]
    return "\n".join(part for part in parts if part)


def _projects_phrase(projects: list[Json]) -> str:
    names = [f"{cell(project['name'])} ({cell(project['workflow'])})" for project in projects]
    return names[0] if len(names) == 1 else "the projects " + ", ".join(names)


def _sources_section(sources: list[Json]) -> str:
    lines = ["## Source datasets\n"]
    for source in sources:
        lines.append(f"- **{cell(source['name'])}** ({cell(source['source_format'])})")
        lines.append(f"  - Licence: {cell(source['licence']) or 'not stated'}")
        lines.append(f"  - Attribution: {cell(source['attribution']) or 'not stated'}")
        if source.get("source_url"):
            lines.append(f"  - Source: {cell(source['source_url'])}")
    lines.append(
        "\nThis snapshot is derived from these datasets and keeps their licences: cite the sources above "
        "when you use it."
    )
    return "\n".join(lines) + "\n"


def _counts_section(counts: Json) -> str:
    lines = [
        "## Items per split\n",
        "| Split | Items | Kept | Dropped | Papers |",
        "|---|---:|---:|---:|---:|",
    ]
    totals = [0, 0, 0, 0]
    for found in counts.get("splits", []):
        row = [found["items"], found["kept"], found["items"] - found["kept"], found["papers"]]
        totals = [total + value for total, value in zip(totals, row, strict=True)]
        lines.append(f"| {cell(found['split'])} | " + " | ".join(str(value) for value in row) + " |")
    lines.append("| **all** | " + " | ".join(str(value) for value in totals) + " |")
    lines.append(
        "\n*Dropped* items are in the canonical files (with `kept: false`) but not in the native-format files."
    )
    return "\n".join(lines) + "\n"


def _labels_section(counts: Json) -> str:
    fields: list[Json] = counts.get("labels", [])
    if not fields:
        return ""
    lines = ["## Gold labels per split\n"]
    for found in fields:
        by_split = {entry["split"]: dict(entry["counts"]) for entry in found["splits"]}
        values = sorted({value for counted in by_split.values() for value in counted})
        lines.append(f"**{cell(found['field'])}**\n")
        lines.append("| Split | " + " | ".join(cell(value) for value in values) + " |")
        lines.append("|---|" + "---:|" * len(values))
        for split, counted in by_split.items():
            lines.append(f"| {cell(split)} | " + " | ".join(str(counted.get(value, 0)) for value in values) + " |")
        lines.append("")
    return "\n".join(lines)


def _agreement_section(agreement: Json) -> str:
    fields: list[Json] = agreement.get("fields", [])
    lines = [
        "## Agreement before adjudication\n",
        "Computed on the submitted annotations of the items in this snapshot, one rating per annotator and item. "
        f"95% intervals from {agreement.get('resamples', 0)} bootstrap resamples of items (seed "
        f"{agreement.get('seed', 0)}). Annotators are named by pseudonyms (A1, A2, ...), as in the raw labels.\n",
    ]
    if not fields:
        lines.append("No label field has ratings.")
        return "\n".join(lines) + "\n"
    lines += [
        "| Field | Level | Items | Raters | Ratings | Percent agreement | Cohen's kappa (mean) | Fleiss' kappa "
        "| Krippendorff's alpha | alpha 95% CI |",
        "|---|---|---:|---:|---:|---:|---:|---:|---:|---|",
    ]
    for found in fields:
        reasons: Json = found.get("reasons", {})
        text_field = found.get("level") == "text"
        lines.append(
            "| "
            + " | ".join(
                [
                    cell(found["field"]),
                    cell(found["level"]),
                    str(found.get("n_items", 0)),
                    str(found.get("n_raters", 0)),
                    str(found.get("n_ratings", 0)),
                    _figure(found.get("percent_agreement"), reasons.get("percent_agreement")),
                    "—" if text_field else _figure(found.get("cohen_kappa_mean"), reasons.get("cohen_kappa_mean")),
                    "—" if text_field else _figure(found.get("fleiss_kappa"), reasons.get("fleiss_kappa")),
                    "—" if text_field else _figure(found.get("krippendorff_alpha"), reasons.get("krippendorff_alpha")),
                    "—"
                    if text_field
                    else _interval(found.get("krippendorff_alpha_ci95"), reasons.get("krippendorff_alpha_ci95")),
                ]
            )
            + " |"
        )
    texts = [found for found in fields if found.get("level") == "text"]
    if texts:
        lines.append("\nFree-text fields are compared after normalisation:\n")
        for found in texts:
            reasons = found.get("reasons", {})
            lines.append(
                f"- {cell(found['field'])}: exact-match rate "
                f"{_figure(found.get('exact_match_rate'), reasons.get('exact_match_rate'))}, mean normalised edit "
                f"distance {_figure(found.get('mean_edit_distance'), reasons.get('mean_edit_distance'))}"
            )
    return "\n".join(lines) + "\n"


def _guidelines_section(guidelines: list[Json]) -> str:
    lines = [
        "## Guidelines\n",
        "| Project | Version | Published | Annotations made under it | Note |",
        "|---|---:|---|---:|---|",
    ]
    for found in guidelines:
        lines.append(
            f"| {cell(found['project'])} | {found['version']} | {found['created_on']} | {found['annotations']} "
            f"| {cell(found['note']) or '—'} |"
        )
    if not guidelines:
        lines.append("| — | — | — | — | no guideline versions |")
    return "\n".join(lines) + "\n"


def _parameters_section(parameters: Json) -> str:
    withheld = parameters.get("withheld_splits") or []
    lines = [
        "## How this export was made\n",
        f"- Formats: {', '.join(cell(name) for name in parameters.get('formats', []))}",
        f"- Splits: {cell(parameters.get('split_rule', ''))}",
        f"- Raw labels of every annotator: {'included' if parameters.get('raw_labels') else 'not included'}",
        f"- Per-item agreement: {'included' if parameters.get('item_agreement') else 'not included'}",
        "- Withheld answers: "
        + (
            "the answers and labels of split(s) " + ", ".join(cell(name) for name in withheld) + " are left out"
            if withheld
            else "none"
        ),
    ]
    return "\n".join(lines) + "\n"


def _files_section(files: Sequence[WrittenFile]) -> str:
    lines = [
        "## Files\n",
        "| File | Format | Records | Bytes | SHA-256 |",
        "|---|---|---:|---:|---|",
    ]
    for found in sorted(files, key=lambda written: written.name):
        lines.append(f"| {cell(found.name)} | {cell(found.format)} | {found.rows} | {found.size} | `{found.sha256}` |")
    lines.append("\n`SHA256SUMS` lists the checksum of every file, this one included (`sha256sum -c SHA256SUMS`).")
    return "\n".join(lines) + "\n"
