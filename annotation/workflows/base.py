"""What every annotation workflow declares.

A workflow is one module in this package with one ``Workflow`` subclass, registered with
``@register``. The queue, records, review and export code use only what is declared here
and never switch on a workflow's name.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, ClassVar

from django import forms

from annotation.models import AssignmentMode, Project, ProjectItem

Payload = dict[str, Any]


class PayloadInvalid(Exception):
    """A payload the workflow's rules reject; ``errors`` maps field names ("__all__" for the
    form as a whole) to messages."""

    def __init__(self, errors: Mapping[str, list[str]]) -> None:
        self.errors = {name: list(messages) for name, messages in errors.items()}
        super().__init__("; ".join(f"{name}: {' '.join(m)}" for name, m in self.errors.items()))


class ConfigInvalid(Exception):
    """A project's workflow configuration the workflow cannot run with; ``messages`` lists
    every problem."""

    def __init__(self, messages: list[str]) -> None:
        self.messages = list(messages)
        super().__init__("; ".join(self.messages))


@dataclass(frozen=True)
class LabelField:
    """A label a workflow contributes to agreement, with its level of measurement.

    ``values`` lists the categories in order for nominal and ordinal fields; agreement uses
    the order for weighted statistics.
    """

    name: str
    label: str
    level: str  # nominal, ordinal, interval, set or text
    values: tuple[Any, ...] = ()

    def value(self, payload: Payload) -> Any:
        return payload.get(self.name)


@dataclass(frozen=True)
class Shortcut:
    keys: str
    description: str


@dataclass
class ItemView:
    """What the workbench shows beside the form: the workflow's display partial gets it as
    ``view``."""

    project_item: ProjectItem
    extra: dict[str, Any] = field(default_factory=dict)


class WorkflowForm(forms.Form):
    """A workflow's form, bound to the item it annotates."""

    def __init__(self, *args: Any, view: ItemView, **kwargs: Any) -> None:
        self.view = view
        super().__init__(*args, **kwargs)

    def to_payload(self) -> Payload:
        """The canonical payload from ``cleaned_data``; only called on a valid form."""
        raise NotImplementedError


class Workflow:
    name: ClassVar[str]
    label: ClassVar[str]
    description: ClassVar[str]
    # "item": one queue entry per QA item; "candidate": one per candidate answer.
    unit: ClassVar[str] = "item"
    # The display partial, rendered with ``view`` (an ItemView) and ``form``.
    template_name: ClassVar[str]
    form_class: ClassVar[type[WorkflowForm]]
    label_fields: ClassVar[tuple[LabelField, ...]]
    shortcuts: ClassVar[tuple[Shortcut, ...]]
    default_guidelines: ClassVar[str]
    default_assignment_mode: ClassVar[str] = AssignmentMode.OPEN
    # Extra pages a lead can open from the project's overview: (button label, URL name taking
    # the project id).
    lead_actions: ClassVar[tuple[tuple[str, str], ...]] = ()
    # Writing workflows start from the figure alone: the item's imported question and answer
    # are kept from annotators on every page and in the API.
    hides_item_text: ClassVar[bool] = False
    # The payload as the API documentation describes it (Markdown: an example and the rules).
    # Empty means the documentation lists the form's fields instead.
    payload_doc: ClassVar[str] = ""

    def check_config(self, config: Mapping[str, Any]) -> dict[str, Any]:
        """A project's ``workflow_config`` in the form it is stored, checked when the project
        is created; raises ConfigInvalid. Workflows without configuration take it as it is."""
        return dict(config)

    def unit_for(self, config: Mapping[str, Any]) -> str:
        """The queue unit for a checked configuration: "item", "candidate", or "pair" (one
        entry per item with at least two candidate answers)."""
        return self.unit

    def form_fields(self, project: Project) -> Mapping[str, forms.Field]:
        """The fields a form of ``project`` may post: what a plain POST and a draft keep.
        Workflows whose form follows the project's configuration override this."""
        return self.form_class.base_fields

    def item_view(self, project_item: ProjectItem) -> ItemView:
        """Everything the display needs, fetched in a fixed number of queries."""
        return ItemView(project_item=project_item)

    def api_context(self, project_item: ProjectItem) -> dict[str, Any]:
        """What an API client needs beyond the item's question, answer and candidate to label
        it as the workbench shows it (as JSON: plain values only). Nothing by default."""
        return {}

    def initial(self, view: ItemView) -> Payload:
        """The payload a new annotation starts from (pre-filled from the item)."""
        return {}

    def form_data(self, view: ItemView, payload: Payload) -> dict[str, Any]:
        """Form field values for a stored payload (the reverse of ``WorkflowForm.to_payload``)."""
        return dict(payload)

    def form(
        self, view: ItemView, *, data: Mapping[str, Any] | None = None, payload: Payload | None = None
    ) -> WorkflowForm:
        """A bound form for ``data``, or an unbound one showing ``payload`` (or the pre-fill)."""
        if data is not None:
            return self.form_class(data, view=view)
        start = payload if payload else self.initial(view)
        return self.form_class(initial=self.form_data(view, start), view=view)

    def validate(self, view: ItemView, payload: Payload) -> Payload:
        """The canonical form of ``payload`` if it passes the workflow's rules, else PayloadInvalid."""
        form = self.form_class(self.form_data(view, payload), view=view)
        if not form.is_valid():
            raise PayloadInvalid({name: [str(m) for m in messages] for name, messages in form.errors.items()})
        return form.to_payload()

    def warnings(self, view: ItemView, payload: Payload) -> list[str]:
        """Things worth a second look that do not block a submit."""
        return []

    def fields_for(self, project: Project) -> tuple[LabelField, ...]:
        """The label fields agreement, review and export use for ``project``. Workflows whose
        fields depend on the project's configuration (a rubric) override this."""
        return self.label_fields

    def gold_fields(self, payload: Payload, project: Project | None = None) -> Payload:
        """The fields an adjudicated payload contributes to a gold record."""
        fields = self.label_fields if project is None else self.fields_for(project)
        return {f.name: f.value(payload) for f in fields}

    def curated(self, item_fields: dict[str, Any], gold: Payload) -> dict[str, Any] | None:
        """The item as it goes into a native-format gold export once adjudicated.

        ``item_fields`` holds the source item's ``question``, ``answer`` and ``evidence``
        (figure file names) plus anything the exporter adds. Returns None when the gold
        decision drops the item, else the fields with the decision's edits applied. Rating
        workflows leave the item as it is.
        """
        return dict(item_fields)
