"""The staff-only invitation page."""

from __future__ import annotations

from django.contrib import messages
from django.contrib.auth.decorators import login_required
from django.http import Http404, HttpResponse
from django.shortcuts import redirect, render
from django.views.decorators.http import require_http_methods

from accounts.forms import InviteForm
from accounts.services import Invitation, InvitationRefused, user_invite
from config.http import AuthenticatedHttpRequest


@require_http_methods(["GET", "POST"])
@login_required
def invite(request: AuthenticatedHttpRequest) -> HttpResponse:
    if not request.user.is_staff:
        raise Http404("No such page.")
    form = InviteForm(request.POST or None)
    if request.method == "POST" and form.is_valid():
        try:
            invitation = user_invite(
                invited_by=request.user,
                email=form.cleaned_data["email"],
                project=form.cleaned_data["project"],
                role=form.cleaned_data["role"],
                site_url=request.build_absolute_uri("/"),
            )
        except InvitationRefused as refused:
            form.add_error("email", str(refused))
        else:
            messages.success(request, _outcome(invitation))
            return redirect("user_invite")
    return render(request, "accounts/invite.html", {"form": form})


def _outcome(invitation: Invitation) -> str:
    email = invitation.user.email
    if invitation.set_password_url:
        verb = "Invited" if invitation.user_created else "Sent a new set-password link to"
        return f"{verb} {email}."
    if invitation.membership_created and invitation.membership is not None:
        return f"Added {email} to {invitation.membership.project.name}; they were told by email."
    if invitation.membership is not None:
        return f"{email} is already in {invitation.membership.project.name} as {invitation.membership.role}."
    return f"{email} already has an account; nothing to do."
