"""Input parsing for the import upload page. Rules about what an import does live in services."""

from __future__ import annotations

import json
from pathlib import PurePath
from typing import Any

from django import forms
from django.conf import settings
from django.core.files.uploadedfile import UploadedFile

from accounts.models import User
from annotation.access import datasets_importable_by
from annotation.importers.base import format_names
from annotation.models import Dataset, SourceFormat
from annotation.uploads import UploadRejected, extensions_for, zip_check

MAX_MAPPING_BYTES = 1024 * 1024


def format_choices() -> list[tuple[str, str]]:
    labels = dict(SourceFormat.choices)
    return [(name, labels.get(name, name)) for name in format_names()]


class ImportUploadForm(forms.Form):
    dataset_name = forms.CharField(
        label="Dataset",
        max_length=200,
        help_text="Pick one of your datasets to add to it, or type a new name to create one.",
        widget=forms.TextInput(attrs={"list": "dataset-names", "autocomplete": "off"}),
    )
    source_format = forms.ChoiceField(label="Format", choices=())
    split = forms.CharField(
        max_length=50, required=False, help_text="Leave empty to use the split the format itself names."
    )
    data_file = forms.FileField(label="Data file")
    images_zip = forms.FileField(
        label="Images (ZIP)",
        required=False,
        widget=forms.FileInput(attrs={"accept": ".zip,application/zip"}),
        help_text="Paths inside the ZIP must match the image paths the data file gives.",
    )
    mapping_file = forms.FileField(
        label="Field mapping (JSON)",
        required=False,
        help_text="For the mapped formats: JSON Lines and CSV.",
        widget=forms.FileInput(attrs={"accept": ".json,application/json"}),
    )

    def __init__(self, *args: Any, user: User, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.user = user
        self.fields["source_format"].choices = format_choices()  # type: ignore[attr-defined]

    def dataset_names(self) -> list[str]:
        """Names offered in the dataset field's suggestion list."""
        return list(datasets_importable_by(self.user).order_by("name").values_list("name", flat=True))

    def clean_dataset_name(self) -> str:
        name: str = self.cleaned_data["dataset_name"].strip()
        if not name:
            raise forms.ValidationError("Give the dataset a name.")
        return name

    def clean_data_file(self) -> UploadedFile:
        return _within_size_limit(self.cleaned_data["data_file"])

    def clean_images_zip(self) -> UploadedFile | None:
        archive: UploadedFile | None = self.cleaned_data.get("images_zip")
        if archive is None:
            return None
        _within_size_limit(archive)
        if PurePath(archive.name or "").suffix.lower() != ".zip":
            raise forms.ValidationError("Images must come as one .zip file.")
        try:
            zip_check(archive)
        except UploadRejected as rejected:
            raise forms.ValidationError(f"This ZIP was refused: {rejected}.") from None
        archive.seek(0)
        return archive

    def clean_mapping_file(self) -> dict[str, Any] | None:
        upload: UploadedFile | None = self.cleaned_data.get("mapping_file")
        if upload is None:
            return None
        if (upload.size or 0) > MAX_MAPPING_BYTES:
            raise forms.ValidationError("A mapping file is at most 1 MB.")
        try:
            mapping = json.loads(upload.read().decode("utf-8"))
        except (UnicodeDecodeError, json.JSONDecodeError) as error:
            raise forms.ValidationError(f"The mapping file is not valid JSON ({error}).") from None
        if not isinstance(mapping, dict):
            raise forms.ValidationError("The mapping file must hold one JSON object.")
        return mapping

    def clean(self) -> dict[str, Any] | None:
        cleaned = super().clean() or {}
        source_format = cleaned.get("source_format")
        if source_format and cleaned.get("data_file") is not None:
            self._check_extension(cleaned["data_file"], source_format)
        if source_format and cleaned.get("dataset_name"):
            self._check_target(cleaned["dataset_name"], source_format)
        return cleaned

    def _check_extension(self, data_file: UploadedFile, source_format: str) -> None:
        allowed = extensions_for(source_format)
        suffix = PurePath(data_file.name or "").suffix.lower()
        if suffix not in allowed:
            names = ", ".join(sorted(allowed))
            self.add_error("data_file", f"A {source_format} file usually ends in {names}; this one is {suffix!r}.")

    def _check_target(self, name: str, source_format: str) -> None:
        mine = datasets_importable_by(self.user).filter(name=name).values_list("source_format", flat=True).first()
        if mine is None and Dataset.objects.filter(name=name).exists():
            # Names are unique site-wide, so a dataset you may not add to blocks its name.
            self.add_error("dataset_name", "You cannot add to a dataset of that name; choose another name.")
        elif mine is not None and mine != source_format:
            self.add_error("source_format", f"{name!r} holds {mine} data; import {source_format} data elsewhere.")


def _within_size_limit(upload: UploadedFile) -> UploadedFile:
    limit = settings.QUIRE_MAX_UPLOAD_BYTES
    if (upload.size or 0) > limit:
        raise forms.ValidationError(f"This file is {upload.size:,} bytes; the limit is {limit:,}.")
    return upload
