from __future__ import annotations

from django import forms

from annotation.models import Project, Role


class InviteForm(forms.Form):
    email = forms.EmailField(help_text="The person signs in with this address.")
    project = forms.ModelChoiceField(
        queryset=Project.objects.select_related("dataset").order_by("name"),
        required=False,
        empty_label="No project",
        help_text="Optional: the project to add them to.",
    )
    role = forms.ChoiceField(choices=Role.choices, initial=Role.ANNOTATOR, help_text="Their role in that project.")
