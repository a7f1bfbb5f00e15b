"""What every source format provides, and the registry of formats."""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO, TYPE_CHECKING, Any, Protocol

from annotation.importers.records import ImportFailed, Unit

if TYPE_CHECKING:
    from annotation.models import Dataset


@dataclass(slots=True)
class ParseContext:
    """Options of one import run, and a place for the parser to note facts about the file."""

    file_name: str
    split: str | None = None
    mapping: dict[str, Any] | None = None
    # Facts the parser learns (a SPIQA layout, say) that the exporter needs later; they are
    # merged into Dataset.extra[format name].
    meta: dict[str, Any] = field(default_factory=dict)


class SourceFormatHandler(Protocol):
    name: str
    licence: str
    attribution: str
    source_url: str

    def parse(self, path: Path, context: ParseContext) -> Iterator[Unit]: ...

    def export(self, dataset: Dataset, out: IO[bytes], *, split: str | None) -> int: ...


_REGISTRY: dict[str, SourceFormatHandler] = {}


def register(handler: SourceFormatHandler) -> SourceFormatHandler:
    _REGISTRY[handler.name] = handler
    return handler


def get_format(name: str) -> SourceFormatHandler:
    from annotation.importers import formats  # noqa: F401  (registers the handlers)

    try:
        return _REGISTRY[name]
    except KeyError:
        known = ", ".join(sorted(_REGISTRY))
        raise ImportFailed(f"unknown format {name!r}; choose one of: {known}") from None


def format_names() -> list[str]:
    from annotation.importers import formats  # noqa: F401

    return sorted(_REGISTRY)
