"""The PostgreSQL statements of a snapshot's fast path, as text (services.exports runs them).

Capture: the live gold records are numbered into a temporary table (``capture``), and the
frozen rows are then copied by ``INSERT ... SELECT``: papers with their figures, items with
their source and gold documents, and one label row per submitted annotation, whose payload is
copied as it is stored. Only the workflow's ``curated`` runs in Python; its results come back
through a temporary table (``curated``) that the item insert joins.

Export: each line of the canonical JSON Lines file (layout 2, see records.py) is put together
by the database from the stored JSON text, in the key order and spelling of
``records.canonical_record`` + ``records.canonical_line``, so the file needs no decoding in
Python. The tests compare the two spellings byte for byte.

Every statement names its tables through ``{placeholders}`` (``render``), and takes its
values as query parameters.
"""

from __future__ import annotations

from collections.abc import Mapping

CAPTURE = "quire_snapshot_capture"
EVIDENCE = "quire_snapshot_evidence"
SOURCES = "quire_snapshot_sources"
ANNOTATORS = "quire_snapshot_annotators"
CURATED = "quire_snapshot_curated"
TEMPORARY = (CAPTURE, EVIDENCE, SOURCES, ANNOTATORS, CURATED)


def render(template: str, tables: Mapping[str, str]) -> str:
    """``template`` with its table placeholders filled (quoted names, and the temporary tables)."""
    temporary = {"capture": CAPTURE, "evidence": EVIDENCE, "sources": SOURCES, "annotators": ANNOTATORS}
    return template.format_map({**temporary, "curated": CURATED, **tables})


def isoformat(column: str) -> str:
    """SQL for ``datetime.isoformat()`` of a timestamptz read in UTC (as Django reads them):
    microseconds only when there are some, and ``+00:00``. One ``to_char``: a whole second's
    ``.000000`` is taken out afterwards."""
    return (
        f"replace(to_char(({column} AT TIME ZONE 'UTC'), 'YYYY-MM-DD\"T\"HH24:MI:SS.US') || '+00:00', '.000000+', '+')"
    )


# Capture ----------------------------------------------------------------------------------------

# For the capture's transactions: its joins and sorts of half a million wide rows then stay in
# memory (the default 4 MB spills them to disk, a quarter of the item insert's time), and these
# one-off statements are not compiled (JIT took 0.6 s of the item insert and saved nothing).
CAPTURE_SETTINGS = ("SET LOCAL work_mem = '64MB'", "SET LOCAL jit = off")

# The live gold records of the snapshot's projects, in export order: the projects in the order
# given, each in queue order. ``paper_position`` is the position of the paper's first item.
CAPTURE_ROWS = """
CREATE TEMPORARY TABLE {capture} ON COMMIT DROP AS
SELECT numbered.*,
       CASE WHEN numbered.paper_id IS NULL THEN NULL
            ELSE MIN(numbered.position) OVER (PARTITION BY numbered.paper_id) END AS paper_position
FROM (
    SELECT gold.id AS record_id, gold.project_id, project.dataset_id, entry.id AS project_item_id,
           entry.item_id, item.paper_id, entry.candidate_id,
           (ROW_NUMBER() OVER (
               ORDER BY array_position(%(projects)s::bigint[], gold.project_id), entry.position, entry.id
           ) - 1)::integer AS position
    FROM {gold_record} AS gold
    JOIN {project_item} AS entry ON entry.id = gold.project_item_id
    JOIN {qa_item} AS item ON item.id = entry.item_id
    JOIN {project} AS project ON project.id = gold.project_id
    WHERE gold.project_id = ANY(%(projects)s::bigint[]) AND gold.reopened_at IS NULL
) AS numbered
"""

CAPTURE_INDEX = "CREATE UNIQUE INDEX ON {capture} (position)"

CAPTURE_EVIDENCE = """
CREATE TEMPORARY TABLE {evidence} ON COMMIT DROP AS
SELECT evidence.item_id, array_agg(figure.file_name::text ORDER BY evidence.position, evidence.id) AS names
FROM {evidence_table} AS evidence
JOIN {figure} AS figure ON figure.id = evidence.figure_id
WHERE evidence.item_id IN (SELECT item_id FROM {capture})
GROUP BY evidence.item_id
"""

CAPTURE_SOURCES = """
CREATE TEMPORARY TABLE {sources} ON COMMIT DROP AS
SELECT source.goldrecord_id AS record_id, array_agg(source.annotation_id ORDER BY source.annotation_id) AS ids
FROM {gold_sources} AS source
WHERE source.goldrecord_id IN (SELECT record_id FROM {capture})
GROUP BY source.goldrecord_id
"""

# A1, A2, ... by account, over the annotators whose submitted annotations the snapshot copies.
CAPTURE_ANNOTATORS = """
CREATE TEMPORARY TABLE {annotators} ON COMMIT DROP AS
SELECT annotator_id, ROW_NUMBER() OVER (ORDER BY annotator_id)::integer AS number
FROM (
    SELECT DISTINCT annotation.annotator_id
    FROM {capture} AS capture
    JOIN {annotation} AS annotation ON annotation.project_item_id = capture.project_item_id
    WHERE annotation.status = %(submitted)s
) AS found
"""

CURATED_TABLE = """
CREATE TEMPORARY TABLE {curated} (
    position integer PRIMARY KEY, split text NOT NULL, kept boolean NOT NULL,
    native_layout text NOT NULL, curated jsonb
) ON COMMIT DROP
"""

CURATED_COPY = "COPY {curated} (position, split, kept, native_layout, curated) FROM STDIN"

# What the workflow's ``curated`` and the split rule read, in one pass.
CURATION_INPUT = """
SELECT capture.position, capture.dataset_id, capture.paper_id IS NOT NULL, paper.external_id::text,
       item.external_id::text, item.split::text, item.question, item.answer, evidence.names,
       capture.candidate_id IS NOT NULL, candidate.text, gold.gold::text, (item.extra -> 'file_kind')::text
FROM {capture} AS capture
JOIN {gold_record} AS gold ON gold.id = capture.record_id
JOIN {qa_item} AS item ON item.id = capture.item_id
LEFT JOIN {paper} AS paper ON paper.id = capture.paper_id
LEFT JOIN {candidate} AS candidate ON candidate.id = capture.candidate_id
LEFT JOIN {evidence} AS evidence ON evidence.item_id = capture.item_id
"""

PAPERS_INSERT = """
INSERT INTO {snapshot_paper} (snapshot_id, external_id, position, data)
SELECT %(snapshot)s, paper.external_id, first.position,
       jsonb_build_object(
           'external_id', paper.external_id, 'version', paper.version, 'title', paper.title,
           'venue', paper.venue, 'year', paper.year, 'decision', paper.decision, 'url', paper.url,
           'extra', paper.extra, 'figures', COALESCE(figures.list, '[]'::jsonb)
       )
FROM (SELECT paper_id, MIN(position) AS position FROM {capture} WHERE paper_id IS NOT NULL GROUP BY paper_id) AS first
JOIN {paper} AS paper ON paper.id = first.paper_id
LEFT JOIN LATERAL (
    SELECT jsonb_agg(
               jsonb_build_object(
                   'file_name', figure.file_name, 'caption', figure.caption, 'content_type', figure.content_type,
                   'figure_type_raw', figure.figure_type_raw, 'figure_type', figure.figure_type, 'extra', figure.extra
               )
               ORDER BY figure.position, figure.id
           ) AS list
    FROM {figure} AS figure WHERE figure.paper_id = paper.id
) AS figures ON true
ORDER BY first.position
"""

# The items, with their source and gold documents in the keys of frozen.frozen_item and
# frozen.frozen_gold (the tests compare both captures), and the curation's results. Each
# document is a row turned into JSON (``to_jsonb``), a fifth cheaper than ``jsonb_build_object``
# over the same values.
ITEMS_INSERT = (
    """
INSERT INTO {snapshot_item} (snapshot_id, position, project_id, project_item_id, qa_item_id, paper_id,
                             split, native_layout, kept, source, gold, curated)
SELECT %(snapshot)s, capture.position, capture.project_id, capture.project_item_id, capture.item_id,
       snapshot_paper.id, curated.split, curated.native_layout, curated.kept,
       to_jsonb(source), to_jsonb(gold_document), curated.curated
FROM {capture} AS capture
JOIN {curated} AS curated ON curated.position = capture.position
JOIN {gold_record} AS gold ON gold.id = capture.record_id
JOIN {qa_item} AS item ON item.id = capture.item_id
JOIN {dataset} AS dataset ON dataset.id = capture.dataset_id
LEFT JOIN {paper} AS paper ON paper.id = capture.paper_id
LEFT JOIN {candidate} AS candidate ON candidate.id = capture.candidate_id
LEFT JOIN {evidence} AS evidence ON evidence.item_id = capture.item_id
LEFT JOIN {sources} AS sources ON sources.record_id = capture.record_id
LEFT JOIN {snapshot_paper} AS snapshot_paper
       ON snapshot_paper.snapshot_id = %(snapshot)s AND snapshot_paper.position = capture.paper_position
CROSS JOIN LATERAL (
    SELECT capture.dataset_id AS dataset, dataset.name AS dataset_name, item.external_id, item.split,
           paper.external_id AS paper, COALESCE(paper.title, '') AS paper_title, item.question, item.answer,
           item.answers, item.rationale, item.has_reference_answer,
           COALESCE(evidence.names, '{{}}'::text[]) AS evidence, item.line, item.extra,
           CASE WHEN capture.candidate_id IS NULL THEN NULL ELSE jsonb_build_object(
               'system_name', candidate.system_name, 'text', candidate.text, 'extra', candidate.extra
           ) END AS candidate
) AS source
CROSS JOIN LATERAL (
    SELECT gold.payload, gold.gold, gold.method, """
    + isoformat("gold.decided_at")
    + """ AS decided_at,
           COALESCE(sources.ids, '{{}}'::bigint[]) AS source_annotations
) AS gold_document
ORDER BY capture.position
"""
)

# The submitted annotations of the captured items, in order (item position, annotator number).
_LIVE_LABELS = """
FROM {capture} AS capture
JOIN {annotation} AS annotation ON annotation.project_item_id = capture.project_item_id
JOIN {annotators} AS annotators ON annotators.annotator_id = annotation.annotator_id
LEFT JOIN {guideline} AS guideline ON guideline.id = annotation.guideline_id
WHERE annotation.status = %(submitted)s
ORDER BY capture.position, annotators.number
"""

LABELS_INSERT = (
    """
INSERT INTO {snapshot_label} (snapshot_id, item_position, annotator, annotation_id, guideline_version,
                              submitted_at, payload)
SELECT %(snapshot)s, capture.position, annotators.number, annotation.id, guideline.version,
       annotation.submitted_at, annotation.payload"""
    + _LIVE_LABELS
)

# Each project's positions: they follow one another, in the order of the projects.
PROJECT_STARTS = "SELECT project_id, MIN(position) FROM {capture} GROUP BY project_id ORDER BY 2"

# What the card's agreement summary reads: the copied labels in order (item position, annotator
# number, guideline version or -1, payload).
RATINGS_INPUT = """
SELECT label.item_position, label.annotator, COALESCE(label.guideline_version, -1), label.payload::text
FROM {snapshot_label} AS label
WHERE label.snapshot_id = %(snapshot)s
ORDER BY label.item_position, label.annotator
"""

# The same, read from the live annotations (by a second connection, before the copy commits).
RATINGS_LIVE = (
    "SELECT capture.position, annotators.number, COALESCE(guideline.version, -1), annotation.payload::text"
    + _LIVE_LABELS
)


# Export -----------------------------------------------------------------------------------------


def _text(expression: str) -> str:
    """A jsonb value as its JSON text."""
    return f"({expression})::text"


_SOURCE_ANSWER = "item.source -> 'answer'"
_SOURCE_ANSWERS = "item.source -> 'answers'"
_GOLD = "item.gold -> 'gold'"
_ANSWER = f"COALESCE(item.curated -> 'answer', {_SOURCE_ANSWER})"
_WITHHELD = "(item.split = ANY(%(withheld)s::text[]))"
_CANDIDATE = "item.source -> 'candidate'"

# The raw labels of an item, in records.raw_label's key order.
_RAW_LABELS = (
    "COALESCE((SELECT concat('[', string_agg(concat("  # noqa: S608 (fixed fragments; values are parameters)
    """'{{"annotator": "A', label.annotator, '", "annotation": ', label.annotation_id, """
    """', "guideline_version": ', COALESCE(label.guideline_version::text, 'null'), """
    f"""', "submitted_at": ', COALESCE('"' || {isoformat("label.submitted_at")} || '"', 'null'), """
    """', "payload": ', label.payload::text, '}}'), ', ' ORDER BY label.annotator), ']') """
    "FROM {snapshot_label} AS label "
    "WHERE label.snapshot_id = item.snapshot_id AND label.item_position = item.position), '[]')"
)


def jsonl_lines(*, raw_labels: bool) -> str:
    """A range of a snapshot's canonical JSON Lines (layout 2) as UTF-8 bytes, one line per
    item with its newline. One ``concat`` per line: chains of ``||`` copy the line once per piece."""
    members = [
        (
            "id",
            "to_json(concat(item.source ->> 'dataset_name', '/', item.source ->> 'split', '/', "
            f"item.source ->> 'external_id', '#' || ({_CANDIDATE} ->> 'system_name')))::text",
        ),
        ("dataset", _text("item.source -> 'dataset_name'")),
        ("source_split", _text("item.source -> 'split'")),
        ("split", "to_json(item.split)::text"),
        ("external_id", _text("item.source -> 'external_id'")),
        ("paper", _text("item.source -> 'paper'")),
        ("paper_title", _text("item.source -> 'paper_title'")),
        ("system", f"COALESCE(({_CANDIDATE} -> 'system_name')::text, 'null')"),
        ("response", f"COALESCE(({_CANDIDATE} -> 'text')::text, 'null')"),
        ("question", _text("COALESCE(item.curated -> 'question', item.source -> 'question')")),
        ("answer", f"CASE WHEN {_WITHHELD} THEN '\"\"' ELSE {_text(_ANSWER)} END"),
        (
            "answers",
            f"CASE WHEN {_WITHHELD} THEN '[]' WHEN {_ANSWER} = {_SOURCE_ANSWER} THEN "
            f"{_text(_SOURCE_ANSWERS)} ELSE jsonb_build_array({_ANSWER})::text END",
        ),
        ("rationale", _text("item.source -> 'rationale'")),
        (
            "evidence",
            "(CASE WHEN item.curated ? 'evidence' THEN item.curated -> 'evidence' "
            "ELSE item.source -> 'evidence' END)::text",
        ),
        ("has_reference_answer", _text("item.source -> 'has_reference_answer'")),
        ("kept", "CASE WHEN item.curated IS NULL THEN 'false' ELSE 'true' END"),
        ("source_question", _text("item.source -> 'question'")),
        ("source_answer", f"CASE WHEN {_WITHHELD} THEN '\"\"' ELSE {_text(_SOURCE_ANSWER)} END"),
        ("gold", f"CASE WHEN {_WITHHELD} THEN 'null' ELSE {_text(_GOLD)} END"),
        ("method", _text("item.gold -> 'method'")),
        ("decided_at", _text("item.gold -> 'decided_at'")),
        ("source_annotations", _text("item.gold -> 'source_annotations'")),
        ("project", "item.project_id::text"),
        ("project_item", "COALESCE(item.project_item_id::text, 'null')"),
        ("item", "COALESCE(item.qa_item_id::text, 'null')"),
        ("extra", _text("item.source -> 'extra'")),
        ("withheld", f"CASE WHEN {_WITHHELD} THEN 'true' ELSE 'false' END"),
    ]
    if raw_labels:
        members.append(("raw_labels", f"CASE WHEN {_WITHHELD} THEN 'null' ELSE {_RAW_LABELS} END"))
    pieces = []
    for index, (name, value) in enumerate(members):
        pieces += [f"'{'{{' if index == 0 else ', '}\"{name}\": '", value]
    pieces += ["'}}'", "chr(10)"]
    return (
        f"SELECT convert_to(concat({', '.join(pieces)}), 'UTF8') FROM {{snapshot_item}} AS item "  # noqa: S608 (fixed fragments; values are parameters)
        "WHERE item.snapshot_id = %(snapshot)s AND item.position >= %(start)s AND item.position < %(stop)s "
        "ORDER BY item.position"
    )
