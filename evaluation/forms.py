"""Forms of the evaluation pages. They parse input; the services in evaluation.services
apply the rules (and their ApplicationError lands on the right field)."""

from __future__ import annotations

import json
from decimal import Decimal
from typing import Any

from django import forms
from django.core.exceptions import ValidationError

from annotation.models import Dataset, Project
from evaluation.judges import JUDGES, OFFLINE_METRICS
from evaluation.models import MAX_CONCURRENT_LIMIT, InferenceRun, JudgeConfig, ModelEndpoint, PromptTemplate
from evaluation.services.endpoints import EndpointSettings, KeyChange
from evaluation.services.inference import DEFAULT_LONGEST_SIDE, DEFAULT_MAX_FIGURES
from evaluation.services.judging import CUSTOM_JUDGE
from evaluation.services.runs import MAX_CHUNK_SIZE
from reviews.models import GoldSnapshot, SnapshotStatus


class EndpointForm(forms.Form):
    name = forms.CharField(max_length=100)
    base_url = forms.CharField(
        max_length=500, label="Base URL", help_text="Up to and including /v1, e.g. http://127.0.0.1:8000/v1."
    )
    model = forms.CharField(max_length=200, help_text="The model name the server expects.")
    api_key = forms.CharField(
        required=False,
        label="API key",
        widget=forms.PasswordInput(render_value=False, attrs={"autocomplete": "new-password"}),
        help_text="Stored encrypted and never shown again. Leave empty to keep the stored key.",
    )
    api_key_env = forms.CharField(
        max_length=100,
        required=False,
        label="Or: environment variable",
        help_text="Read the key from this variable on the workers instead of storing it.",
    )
    clear_key = forms.BooleanField(required=False, label="Remove the stored key (the server needs none)")
    supports_images = forms.BooleanField(required=False, label="Accepts images")
    supports_logprobs = forms.BooleanField(required=False, label="Returns top_logprobs")
    max_concurrent = forms.IntegerField(min_value=1, max_value=MAX_CONCURRENT_LIMIT, initial=4)
    requests_per_minute = forms.IntegerField(min_value=1, required=False)
    tokens_per_minute = forms.IntegerField(min_value=1, required=False)
    timeout_seconds = forms.FloatField(min_value=0.1, initial=60.0, label="Timeout (seconds)")
    price_input_per_million = forms.DecimalField(
        min_value=Decimal(0),
        max_digits=12,
        decimal_places=4,
        initial=Decimal(0),
        label="Price per million input tokens",
    )
    price_output_per_million = forms.DecimalField(
        min_value=Decimal(0),
        max_digits=12,
        decimal_places=4,
        initial=Decimal(0),
        label="Price per million output tokens",
    )

    def __init__(self, *args: Any, endpoint: ModelEndpoint | None = None, **kwargs: Any) -> None:
        if endpoint is not None and "initial" not in kwargs:
            kwargs["initial"] = {name: getattr(endpoint, name) for name in self.setting_names() if name != "api_key"}
            kwargs["initial"]["api_key_env"] = endpoint.api_key_env
        super().__init__(*args, **kwargs)
        if endpoint is None or not endpoint.api_key_encrypted:
            del self.fields["clear_key"]

    @staticmethod
    def setting_names() -> list[str]:
        return list(EndpointSettings.__dataclass_fields__)

    def endpoint_settings(self) -> EndpointSettings:
        return EndpointSettings(**{name: self.cleaned_data[name] for name in self.setting_names()})

    def key_change(self) -> KeyChange:
        if self.cleaned_data.get("clear_key"):
            return KeyChange(api_key="")
        return KeyChange(api_key_env=self.cleaned_data["api_key_env"], api_key=self.cleaned_data["api_key"] or None)


class PromptTemplateForm(forms.Form):
    name = forms.CharField(max_length=100, help_text="Saving under an existing name makes a new version.")
    text = forms.CharField(
        widget=forms.Textarea(attrs={"rows": 10}),
        strip=False,
        help_text="Placeholders: {question} (required), {captions}, {passage}. Other braces are kept as written.",
    )
    system_message = forms.CharField(widget=forms.Textarea(attrs={"rows": 3}), required=False, strip=False)
    note = forms.CharField(max_length=300, required=False, help_text="What this version changes.")


class ScopeForm(forms.Form):
    """Which items: a project's, or a dataset's (one split or all)."""

    project = forms.ModelChoiceField(queryset=Project.objects.order_by("name"), required=False)
    dataset = forms.ModelChoiceField(
        queryset=Dataset.objects.order_by("name"), required=False, help_text="Or a dataset (and a split)."
    )
    split = forms.CharField(max_length=50, required=False, help_text="Empty: every split of the dataset.")

    def clean(self) -> dict[str, Any]:
        cleaned = super().clean() or {}
        sources = [name for name in ("project", "dataset", "snapshot") if cleaned.get(name)]
        if len(sources) != 1:
            choices = (
                "a project, a dataset or a gold snapshot" if "snapshot" in self.fields else "a project or a dataset"
            )
            raise ValidationError(f"Choose {choices} (one of them).")
        return cleaned


def snapshot_field(help_text: str) -> forms.ModelChoiceField[GoldSnapshot]:
    return forms.ModelChoiceField(
        queryset=GoldSnapshot.objects.filter(status=SnapshotStatus.DONE).select_related("project"),
        required=False,
        label="Or: gold snapshot",
        help_text=help_text,
    )


class InferenceRunForm(ScopeForm):
    endpoint = forms.ModelChoiceField(queryset=ModelEndpoint.objects.order_by("name"))
    prompt = forms.ModelChoiceField(
        queryset=PromptTemplate.objects.order_by("name", "-version"), help_text="A stored prompt version."
    )
    system_name = forms.CharField(max_length=200, help_text="The answers become candidates of this system.")
    input_mode = forms.ChoiceField(choices=InferenceRun.InputMode.choices)
    snapshot = snapshot_field("The items a finished gold snapshot kept, asked as it curated them.")
    temperature = forms.FloatField(min_value=0, max_value=2, initial=0.0)
    max_tokens = forms.IntegerField(min_value=1, initial=1024)
    top_p = forms.FloatField(min_value=0, max_value=1, required=False)
    seed = forms.IntegerField(required=False, help_text="Sent to servers that support sampling seeds.")
    figure_scope = forms.ChoiceField(
        choices=[("paper", "The paper's figures (SPIQA), evidence always included"), ("evidence", "Evidence only")]
    )
    max_figures = forms.IntegerField(min_value=1, max_value=64, initial=DEFAULT_MAX_FIGURES)
    shuffle_seed = forms.IntegerField(
        required=False, initial=0, help_text="Figures are shuffled with this seed per item; empty keeps paper order."
    )
    image_longest_side = forms.IntegerField(
        min_value=64, max_value=8192, initial=DEFAULT_LONGEST_SIDE, label="Longest image side (pixels)"
    )
    chunk_size = forms.IntegerField(min_value=1, max_value=MAX_CHUNK_SIZE, initial=200)
    use_cache = forms.BooleanField(required=False, initial=True, help_text="Answer repeated requests from the cache.")

    field_order = ["endpoint", "prompt", "system_name", "input_mode", "project", "dataset", "split", "snapshot"]

    def parameters(self) -> dict[str, Any]:
        names = ("temperature", "max_tokens", "top_p", "seed", "figure_scope", "max_figures", "shuffle_seed")
        values = {name: self.cleaned_data[name] for name in names if self.cleaned_data[name] is not None}
        return {
            **values,
            "image_longest_side": self.cleaned_data["image_longest_side"],
            "use_cache": self.cleaned_data["use_cache"],
        }


OFFLINE_TITLES = {
    "exact_match": "Exact match (offline, no endpoint)",
    "relaxed_accuracy": "Relaxed accuracy, 5% (offline, no endpoint)",
    "rouge_l": "ROUGE-L F1 (offline, no endpoint)",
}


def judge_choices() -> list[tuple[str, str]]:
    model_judges = [(info.name, info.title) for info in JUDGES.values()] + [(CUSTOM_JUDGE, "Custom prompt and parser")]
    return model_judges + [(name, OFFLINE_TITLES[name]) for name in OFFLINE_METRICS]


class JudgeRunForm(ScopeForm):
    judge = forms.ChoiceField(choices=judge_choices)
    endpoint = forms.ModelChoiceField(
        queryset=ModelEndpoint.objects.order_by("name"),
        required=False,
        help_text="Every judge but the offline metrics asks a model; leave it empty for those.",
    )
    answers_system = forms.CharField(max_length=200, required=False, label="Answers of system")
    answers_run = forms.ModelChoiceField(
        queryset=InferenceRun.objects.order_by("-created_at"), required=False, label="Or: answers of inference run"
    )
    snapshot = snapshot_field("Grade the answers to the items a finished gold snapshot kept, against its curated gold.")
    judge_config = forms.ModelChoiceField(
        queryset=JudgeConfig.objects.order_by("name"),
        required=False,
        label="Calibrated configuration",
        help_text=(
            "A threshold marks each score correct or not; a learned configuration is QAEval's fallback. "
            "It must be for the chosen judge."
        ),
    )
    config = forms.CharField(
        widget=forms.Textarea(attrs={"rows": 4}),
        required=False,
        initial="{}",
        label="Settings (JSON)",
        help_text=(
            "The judge's settings as JSON (template version, profile, mode, a custom prompt and parser; "
            'relaxed accuracy\'s "tolerance"). QAEval with a trained fallback: '
            '{"fallback": "learned", "learned_fallback": ID}.'
        ),
    )
    chunk_size = forms.IntegerField(min_value=1, max_value=MAX_CHUNK_SIZE, initial=200)
    use_cache = forms.BooleanField(required=False, initial=True, help_text="Repeated requests cost nothing.")

    field_order = [
        "judge",
        "endpoint",
        "answers_system",
        "answers_run",
        "project",
        "dataset",
        "split",
        "snapshot",
        "judge_config",
        "config",
    ]

    def clean_config(self) -> dict[str, Any]:
        text = self.cleaned_data["config"].strip() or "{}"
        try:
            value = json.loads(text)
        except ValueError as error:
            raise ValidationError(f"Not valid JSON: {error}.") from None
        if not isinstance(value, dict):
            raise ValidationError('Give a JSON object, e.g. {} or {"profile": "one-token"}.')
        return value

    def clean(self) -> dict[str, Any]:
        cleaned = forms.Form.clean(self) or {}
        if bool(cleaned.get("answers_system")) == bool(cleaned.get("answers_run")):
            raise ValidationError("Choose the answers: a system name or an inference run (not both).")
        sources = [name for name in ("project", "dataset", "snapshot") if cleaned.get(name)]
        if len(sources) > 1 or (not sources and cleaned.get("answers_run") is None):
            raise ValidationError("Choose a project, a dataset or a gold snapshot (one of them).")
        return cleaned


class LearnedFallbackForm(forms.Form):
    project = forms.ModelChoiceField(
        queryset=Project.objects.filter(workflow="qascore_rating").order_by("name"),
        help_text="A QAScore rating project: its submitted labels train the classifier.",
    )
