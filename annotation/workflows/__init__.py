"""The annotation workflows, one plug-in module each (see ``base.py`` for what one declares).

Modules in this package register themselves on import; ``get_workflow`` and
``workflow_choices`` import them all first.
"""

from __future__ import annotations

import importlib
import pkgutil
from functools import cache

from annotation.workflows.base import Workflow

_REGISTRY: dict[str, Workflow] = {}


def register(workflow_class: type[Workflow]) -> type[Workflow]:
    _REGISTRY[workflow_class.name] = workflow_class()
    return workflow_class


@cache
def _load_all() -> None:
    for module in pkgutil.iter_modules(__path__):
        if module.name != "base":
            importlib.import_module(f"{__name__}.{module.name}")


class UnknownWorkflow(LookupError):
    pass


def get_workflow(name: str) -> Workflow:
    _load_all()
    try:
        return _REGISTRY[name]
    except KeyError:
        known = ", ".join(sorted(_REGISTRY))
        raise UnknownWorkflow(f"unknown workflow {name!r}; choose one of: {known}") from None


def workflow_choices() -> list[tuple[str, str]]:
    _load_all()
    return [(name, _REGISTRY[name].label) for name in sorted(_REGISTRY)]
