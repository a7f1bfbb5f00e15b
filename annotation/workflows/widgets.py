"""Form widgets that carry keyboard shortcuts.

Each option (or the control itself) gets a ``data-key`` attribute; the workbench script
finds the element for a pressed key by that attribute, so the shortcut list shown in the
``?`` overlay and the keys that work are declared in one place: the workflow's form.
"""

from __future__ import annotations

from typing import Any

from django import forms


class _KeyedOptions:
    option_keys: dict[str, str]

    def create_option(  # type: ignore[no-untyped-def]
        self, name, value, label, selected, index, subindex=None, attrs=None
    ) -> dict[str, Any]:
        option: dict[str, Any] = super().create_option(  # type: ignore[misc]
            name, value, label, selected, index, subindex=subindex, attrs=attrs
        )
        key = self.option_keys.get(str(value))
        if key:
            option["attrs"] = {**option["attrs"], "data-key": key}
            option["label"] = f"{label} [{key}]"
        return option


class KeyedRadioSelect(_KeyedOptions, forms.RadioSelect):
    def __init__(self, *, keys: dict[str, str], attrs: dict[str, Any] | None = None) -> None:
        self.option_keys = keys
        super().__init__(attrs=attrs)


class KeyedCheckboxSelectMultiple(_KeyedOptions, forms.CheckboxSelectMultiple):
    def __init__(self, *, keys: dict[str, str], attrs: dict[str, Any] | None = None) -> None:
        self.option_keys = keys
        super().__init__(attrs=attrs)


def keyed(key: str, attrs: dict[str, Any] | None = None) -> dict[str, Any]:
    """Widget attrs that give a text box or select its focus shortcut."""
    return {**(attrs or {}), "data-key": key}
