"""Inference prompt templates: stored, versioned, with presets Quire installs on first use.

Placeholders are ``{question}``, ``{captions}`` and ``{passage}``, replaced in one pass so
text inserted for one is never searched for another. Any other braces are literal text
(SPIQA's prompt asks for ``{'Answer': ...}``).
"""

from __future__ import annotations

import hashlib
import re
from dataclasses import dataclass

from django.db import IntegrityError, transaction
from django.db.models import Max

from accounts.models import User
from annotation.errors import ApplicationError
from evaluation.models import PromptTemplate

PLACEHOLDER = re.compile(r"\{(question|captions|passage)\}")
# Something that looks like a placeholder: a misspelt one would otherwise go out as text.
PLACEHOLDER_LIKE = re.compile(r"\{([A-Za-z_]+)\}")
PLACEHOLDERS = ("question", "captions", "passage")


@dataclass(frozen=True, slots=True)
class Preset:
    name: str
    text: str
    note: str
    system_message: str = ""


# google/spiqa, Evals (test-A direct QA with GPT-4o and Gemini), `_PROMPT`: its backslash
# continuations join the lines without spaces of their own; "<question>" became {question}.
# The script then sends, for each figure i, "Image i: ", the image, "Caption i: <caption>"
# and a blank line; inference.py lays the figures out the same way.
SPIQA_DIRECT_QA = Preset(
    name="spiqa-direct-qa",
    text=(
        "You are given a question, a few input images, and a caption corresponding to each input image. "
        "Please answer the question based on the input images and corresponding captions. "
        "Question: {question}. Output in the following format: {'Answer': 'Direct Answer to the Question'}. \n"
    ),
    note="SPIQA direct QA (google/spiqa test-A evaluation prompt), figures and captions after the text.",
)
PRESETS = {preset.name: preset for preset in (SPIQA_DIRECT_QA,)}


def prompt_sha256(text: str) -> str:
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


def prompt_render(text: str, values: dict[str, str]) -> str:
    return PLACEHOLDER.sub(lambda match: values.get(match[1], ""), text)


def prompt_check(text: str) -> None:
    if "{question}" not in text:
        raise ApplicationError("The prompt needs {question}.", errors={"text": ["The prompt needs {question}."]})
    unknown = sorted({name for name in PLACEHOLDER_LIKE.findall(text) if name not in PLACEHOLDERS})
    if unknown:
        message = f"Unknown placeholder {', '.join('{' + name + '}' for name in unknown)}; use {{question}}, "
        message += "{captions} or {passage}."
        raise ApplicationError(message, errors={"text": [message]})


def prompt_template_create(
    *, name: str, text: str, system_message: str = "", note: str = "", created_by: User | None = None
) -> PromptTemplate:
    """A new version of the named template (version 1 for a new name). An unchanged text and
    system message is not a new version: the latest one is returned."""
    name = name.strip()
    if not name:
        raise ApplicationError("A name is required.", errors={"name": ["A name is required."]})
    prompt_check(text)
    latest = PromptTemplate.objects.filter(name=name).order_by("-version").first()
    if latest is not None and latest.text == text and latest.system_message == system_message:
        return latest
    try:
        with transaction.atomic():
            version = (PromptTemplate.objects.filter(name=name).aggregate(top=Max("version"))["top"] or 0) + 1
            return PromptTemplate.objects.create(
                name=name,
                version=version,
                text=text,
                system_message=system_message,
                sha256=prompt_sha256(text),
                note=note,
                created_by=created_by,
            )
    except IntegrityError:
        raise ApplicationError("Someone saved a version of this template at the same moment; try again.") from None


def prompt_presets_install() -> None:
    """Make sure every preset exists (as version 1 of its name); idempotent."""
    present = set(PromptTemplate.objects.filter(name__in=PRESETS).values_list("name", flat=True))
    for preset in PRESETS.values():
        if preset.name not in present:
            prompt_template_create(
                name=preset.name, text=preset.text, system_message=preset.system_message, note=preset.note
            )


def prompt_template_latest(name: str) -> PromptTemplate:
    """The newest version of a template by name (presets are installed first)."""
    if name in PRESETS:
        prompt_presets_install()
    template = PromptTemplate.objects.filter(name=name).order_by("-version").first()
    if template is None:
        raise ApplicationError(f"No prompt template named {name!r}.", status=404)
    return template
