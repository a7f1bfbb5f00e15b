"""Inference runs in the engine: the request of each item (prompt, figures, captions, full
text) and the candidate answer each reply becomes.

Figures go as base64 data URLs, downscaled so their longest side is at most the run's
``image_longest_side``. The recorded request (stored and hashed for the cache) names each
image by its figure and SHA-256 instead; the data URL is built in the sending thread.

A run over a gold snapshot asks the question as the snapshot curated it, and treats the
figures the curated item cites as its evidence.
"""

from __future__ import annotations

import base64
import io
import random
import threading
from collections import OrderedDict, defaultdict
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from django.core.files.storage import default_storage
from django.db.models import QuerySet
from PIL import Image

from annotation.errors import ApplicationError
from annotation.models import CandidateAnswer, Evidence, Figure
from evaluation.models import InferenceChunk, InferenceResult, InferenceRun
from evaluation.services.engine import Call, ItemSteps
from evaluation.services.prompts import prompt_render
from evaluation.services.sources import CuratedText, curated_texts

InputMode = InferenceRun.InputMode
IMAGE_MODES = (InputMode.FIGURES_CAPTIONS, InputMode.FIGURES)
CAPTION_MODES = (InputMode.FIGURES_CAPTIONS, InputMode.CAPTIONS)
# Where a passage or full text may sit, item first (the most specific), then the paper.
ITEM_TEXT_KEYS = ("passage", "full_text", "context")
PAPER_TEXT_KEYS = ("full_text", "passage")
# SPIQA's direct-QA scripts show at most eight figures: the referenced ones and others.
DEFAULT_MAX_FIGURES = 8
DEFAULT_LONGEST_SIDE = 1024
ENCODED_CACHE_SIZE = 256


@dataclass(frozen=True, slots=True)
class FigureInput:
    figure_id: int
    file_name: str
    caption: str
    image_name: str
    image_sha256: str


@dataclass(frozen=True, slots=True)
class InferenceWork:
    pk: int
    item_id: int
    question: str
    passage: str
    figures: tuple[FigureInput, ...]


@dataclass(frozen=True, slots=True)
class InferenceSettings:
    mode: str
    figure_scope: str
    max_figures: int
    shuffle_seed: int | None
    image_longest_side: int
    generation: dict[str, Any]


@dataclass
class InferenceContext:
    run_id: int
    system_name: str
    model: str
    template_text: str
    system_message: str
    prompt_version: int
    prompt_sha256: str
    prompt_label: str
    settings: InferenceSettings
    encoder: ImageEncoder = field(repr=False)


def inference_settings(parameters: dict[str, Any], mode: str) -> InferenceSettings:
    generation = {
        name: parameters[name]
        for name in ("temperature", "top_p", "max_tokens", "seed")
        if parameters.get(name) is not None
    }
    return InferenceSettings(
        mode=mode,
        figure_scope=str(parameters.get("figure_scope") or "paper"),
        max_figures=int(parameters.get("max_figures") or DEFAULT_MAX_FIGURES),
        shuffle_seed=parameters.get("shuffle_seed"),
        image_longest_side=int(parameters.get("image_longest_side") or DEFAULT_LONGEST_SIDE),
        generation=generation,
    )


# --- Images ------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class EncodedImage:
    data_url: str
    width: int
    height: int


class ImageEncoder:
    """Downscales and encodes figures; the papers' figures recur across their questions, so
    recent encodings are kept (thread-safe: the sending threads share one encoder)."""

    def __init__(self, longest_side: int) -> None:
        self.longest_side = longest_side
        self._lock = threading.Lock()
        self._recent: OrderedDict[str, EncodedImage] = OrderedDict()

    def encode(self, image_name: str) -> EncodedImage:
        with self._lock:
            if image_name in self._recent:
                self._recent.move_to_end(image_name)
                return self._recent[image_name]
        encoded = self._encode(image_name)
        with self._lock:
            self._recent[image_name] = encoded
            while len(self._recent) > ENCODED_CACHE_SIZE:
                self._recent.popitem(last=False)
        return encoded

    def _encode(self, image_name: str) -> EncodedImage:
        with default_storage.open(image_name, "rb") as stored, Image.open(stored) as opened:
            jpeg = opened.format == "JPEG"
            opened.thumbnail((self.longest_side, self.longest_side), Image.Resampling.LANCZOS)
            image: Image.Image = opened
            if jpeg and image.mode != "RGB":
                image = image.convert("RGB")
            elif not jpeg and image.mode not in ("RGB", "RGBA", "L", "LA"):
                image = image.convert("RGBA")
            buffer = io.BytesIO()
            if jpeg:
                image.save(buffer, format="JPEG", quality=90)
            else:
                image.save(buffer, format="PNG")
            media = "image/jpeg" if jpeg else "image/png"
            data = base64.b64encode(buffer.getvalue()).decode("ascii")
            return EncodedImage(data_url=f"data:{media};base64,{data}", width=image.width, height=image.height)


# --- Requests ------------------------------------------------------------------------------


def _figures_for(
    item_id: int, paper_figures: list[FigureInput], evidence: list[int], settings: InferenceSettings
) -> tuple[FigureInput, ...]:
    """The item's figures: its evidence alone, or (SPIQA) the paper's figures with the
    evidence always among them, at most ``max_figures``, shuffled by a seed per item so a
    run is reproducible."""
    by_id = {figure.figure_id: figure for figure in paper_figures}
    referenced = [by_id[figure_id] for figure_id in evidence if figure_id in by_id]
    if settings.figure_scope == "evidence":
        return tuple(referenced[: settings.max_figures])
    rng = random.Random(f"{settings.shuffle_seed}:{item_id}")  # noqa: S311 - reproducible order, not secrecy
    others = [figure for figure in paper_figures if figure.figure_id not in set(evidence)]
    chosen = referenced[: settings.max_figures]
    if len(others) > settings.max_figures - len(chosen):
        others = rng.sample(others, settings.max_figures - len(chosen))
    chosen += others
    if settings.shuffle_seed is not None:
        rng.shuffle(chosen)
    else:
        chosen.sort(key=paper_figures.index)
    return tuple(chosen)


def _captions_text(figures: tuple[FigureInput, ...]) -> str:
    return "\n\n".join(f"Caption {index}: {figure.caption}" for index, figure in enumerate(figures))


def _image_reference(figure: FigureInput, longest_side: int) -> dict[str, Any]:
    return {
        "type": "image_url",
        "image_url": {"url": f"quire-figure:{figure.figure_id}"},
        "quire_figure": {
            "id": figure.figure_id,
            "file_name": figure.file_name,
            "sha256": figure.image_sha256,
            "longest_side": longest_side,
        },
    }


def _user_content(context: InferenceContext, work: InferenceWork, figures: tuple[FigureInput, ...]) -> Any:
    """The user message as recorded: a string, or parts with image references. SPIQA's
    layout: the prompt, then per figure "Image i: ", the image, "Caption i: ..." and a
    blank line. A template with {captions} gets the captions there instead."""
    settings = context.settings
    with_captions = settings.mode in CAPTION_MODES
    captions_inline = with_captions and "{captions}" in context.template_text
    values = {
        "question": work.question,
        "captions": _captions_text(figures) if captions_inline else "",
        "passage": work.passage if settings.mode == InputMode.FULL_TEXT else "",
    }
    prompt = prompt_render(context.template_text, values)
    if settings.mode == InputMode.FULL_TEXT and "{passage}" not in context.template_text:
        prompt = f"{prompt}\n\n{work.passage}"
    if settings.mode not in IMAGE_MODES:
        if with_captions and not captions_inline:
            prompt += "".join(f"Caption {index}: {figure.caption}\n\n" for index, figure in enumerate(figures))
        return prompt
    parts: list[dict[str, Any]] = [{"type": "text", "text": prompt}]
    for index, figure in enumerate(figures):
        parts.append({"type": "text", "text": f"Image {index}: "})
        parts.append(_image_reference(figure, settings.image_longest_side))
        if with_captions and not captions_inline:
            parts.append({"type": "text", "text": f"Caption {index}: {figure.caption}"})
        parts.append({"type": "text", "text": "\n\n"})
    return parts


def _inline_images(body: dict[str, Any], encoder: ImageEncoder, names: dict[int, str]) -> dict[str, Any]:
    """The body to send: each image reference replaced by its data URL."""
    messages = []
    for message in body["messages"]:
        content = message["content"]
        if isinstance(content, list):
            content = [
                {"type": "image_url", "image_url": {"url": encoder.encode(names[part["quire_figure"]["id"]]).data_url}}
                if part.get("type") == "image_url"
                else part
                for part in content
            ]
        messages.append({**message, "content": content})
    return {**body, "messages": messages}


def inference_call(context: InferenceContext, work: InferenceWork) -> Call:
    settings = context.settings
    figures = work.figures if settings.mode in (*IMAGE_MODES, *CAPTION_MODES) else ()
    if settings.mode in IMAGE_MODES:
        figures = tuple(figure for figure in figures if figure.image_name)
    if settings.mode in (*IMAGE_MODES, *CAPTION_MODES) and not figures:
        raise ItemInputMissing("this item has no figures with images" if settings.mode in IMAGE_MODES else "no figures")
    if settings.mode == InputMode.FULL_TEXT and not work.passage:
        raise ItemInputMissing("the source has no full text or passage for this item")
    messages: list[dict[str, Any]] = []
    if context.system_message:
        messages.append({"role": "system", "content": context.system_message})
    messages.append({"role": "user", "content": _user_content(context, work, figures)})
    recorded = {"model": context.model, "messages": messages, **settings.generation}
    if settings.mode not in IMAGE_MODES:
        return Call(recorded=recorded)
    names = {figure.figure_id: figure.image_name for figure in figures}
    build: Callable[[], dict[str, Any]] = lambda: _inline_images(recorded, context.encoder, names)  # noqa: E731
    return Call(recorded=recorded, build=build)


class ItemInputMissing(Exception):
    """The item lacks what the input mode needs; recorded as the item's error."""


# --- The run kind ----------------------------------------------------------------------------


class InferenceKind:
    name = "inference"
    run_model = InferenceRun
    result_model = InferenceResult
    chunk_model = InferenceChunk
    finished_statuses: tuple[str, ...] = (InferenceResult.Status.DONE,)

    def chunks(self, run_id: int) -> QuerySet[InferenceChunk]:
        return InferenceChunk.objects.filter(run_id=run_id)

    def prepare(self, run: InferenceRun) -> InferenceContext:
        prompt = run.prompt
        settings = inference_settings(run.parameters, run.input_mode)
        endpoint = run.endpoint
        if endpoint is None:  # ruled out by the inference_run_has_endpoint constraint
            raise ApplicationError("An inference run needs an endpoint.")
        if run.input_mode in IMAGE_MODES and not endpoint.supports_images:
            raise ApplicationError(f"Endpoint {endpoint.name} is not marked as accepting images.")
        return InferenceContext(
            run_id=run.pk,
            system_name=run.system_name,
            model=endpoint.model,
            template_text=prompt.text,
            system_message=prompt.system_message,
            prompt_version=prompt.version,
            prompt_sha256=prompt.sha256,
            prompt_label=str(prompt),
            settings=settings,
            encoder=ImageEncoder(settings.image_longest_side),
        )

    def load(self, run: InferenceRun, context: InferenceContext, start: int, stop: int) -> list[InferenceWork]:
        rows = list(
            InferenceResult.objects.filter(
                run=run, position__gte=start, position__lt=stop, status=InferenceResult.Status.PENDING
            )
            .select_related("item", "item__paper")
            .order_by("position")
        )
        needs_figures = context.settings.mode in (*IMAGE_MODES, *CAPTION_MODES)
        paper_figures, evidence = _figures_of(rows) if needs_figures else ({}, {})
        curated = curated_texts(run.snapshot_id, [row.item_id for row in rows]) if run.snapshot_id is not None else {}
        if curated and needs_figures:
            _cite_curated_evidence(rows, curated, paper_figures, evidence)
        return [
            InferenceWork(
                pk=row.pk,
                item_id=row.item_id,
                question=_curated_question(curated.get(row.item_id), row.item.question),
                passage=_passage(row),
                figures=_figures_for(
                    row.item_id,
                    paper_figures.get(row.item.paper_id or 0, []),
                    evidence.get(row.item_id, []),
                    context.settings,
                )
                if needs_figures
                else (),
            )
            for row in rows
        ]

    def steps(self, run: InferenceRun, context: InferenceContext, work: InferenceWork) -> ItemSteps:
        try:
            call = inference_call(context, work)
        except ItemInputMissing as missing:
            return {"status": InferenceResult.Status.ERROR, "error": str(missing)}
        results = yield [call]
        return {
            "status": InferenceResult.Status.DONE,
            "response_text": results[0].chat.text,
            "prompt_version": context.prompt_version,
            "prompt_sha256": context.prompt_sha256,
        }

    def after_write(self, run: InferenceRun, written: list[tuple[Any, dict[str, Any]]]) -> None:
        """Each answer becomes a candidate of the run's system name, with its cost."""
        answered = [(work, row) for work, row in written if row["status"] == InferenceResult.Status.DONE]
        if not answered:
            return
        CandidateAnswer.objects.bulk_create(
            [
                CandidateAnswer(
                    item_id=work.item_id,
                    system_name=run.system_name,
                    text=row["response_text"],
                    origin=CandidateAnswer.Origin.INFERENCE,
                    extra=_candidate_extra(run, work, row),
                )
                for work, row in answered
            ],
            ignore_conflicts=True,
        )
        ids: dict[int, int] = dict(
            CandidateAnswer.objects.filter(
                system_name=run.system_name, item_id__in=[work.item_id for work, _ in answered]
            ).values_list("item_id", "pk")
        )
        InferenceResult.objects.bulk_update(
            [InferenceResult(pk=work.pk, candidate_id=ids.get(work.item_id)) for work, _ in answered], ["candidate"]
        )


def _candidate_extra(run: InferenceRun, work: InferenceWork, row: dict[str, Any]) -> dict[str, Any]:
    return {
        "inference_run": run.pk,
        "inference_result": work.pk,
        "model": row["response_model"],
        "prompt": f"{run.prompt.name} v{row['prompt_version']}",
        "prompt_sha256": row["prompt_sha256"],
        "input_mode": run.input_mode,
        "prompt_tokens": row["prompt_tokens"],
        "completion_tokens": row["completion_tokens"],
        "latency_ms": row["latency_ms"],
        "cost": str(row["cost"]),
        "cache_hit": row["cache_hit"],
    }


def _curated_question(text: CuratedText | None, question: str) -> str:
    return text.question if text is not None and text.question is not None else question


def _cite_curated_evidence(
    rows: list[InferenceResult],
    curated: dict[int, CuratedText],
    paper_figures: dict[int, list[FigureInput]],
    evidence: dict[int, list[int]],
) -> None:
    """Each item's evidence as the snapshot curated it: the paper's figures of those file
    names, in the curated order (names no figure has any more are left out)."""
    for row in rows:
        text = curated.get(row.item_id)
        if text is None or text.evidence is None:
            continue
        by_name = {figure.file_name: figure.figure_id for figure in paper_figures.get(row.item.paper_id or 0, [])}
        evidence[row.item_id] = [by_name[name] for name in text.evidence if name in by_name]


def _passage(row: InferenceResult) -> str:
    for key in ITEM_TEXT_KEYS:
        value = row.item.extra.get(key)
        if isinstance(value, str) and value.strip():
            return value
    paper = row.item.paper
    for key in PAPER_TEXT_KEYS:
        value = paper.extra.get(key) if paper is not None else None
        if isinstance(value, str) and value.strip():
            return value
    return ""


def _figures_of(rows: list[InferenceResult]) -> tuple[dict[int, list[FigureInput]], dict[int, list[int]]]:
    """The figures of the rows' papers (in paper order) and each item's evidence figure ids."""
    paper_ids = {row.item.paper_id for row in rows if row.item.paper_id is not None}
    figures: dict[int, list[FigureInput]] = defaultdict(list)
    for figure in Figure.objects.filter(paper_id__in=paper_ids).order_by("paper_id", "position", "pk"):
        figures[figure.paper_id].append(
            FigureInput(
                figure_id=figure.pk,
                file_name=figure.file_name,
                caption=figure.caption,
                image_name=figure.image.name or "",
                image_sha256=figure.image_sha256,
            )
        )
    evidence: dict[int, list[int]] = defaultdict(list)
    links = Evidence.objects.filter(item_id__in=[row.item_id for row in rows]).order_by("item_id", "position")
    for item_id, figure_id in links.values_list("item_id", "figure_id"):
        evidence[item_id].append(figure_id)
    return figures, evidence
