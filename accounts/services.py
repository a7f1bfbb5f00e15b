"""State changes of accounts. Views call these, nothing else."""

from __future__ import annotations

from dataclasses import dataclass
from functools import partial

from allauth.account import app_settings as allauth_settings
from allauth.account.models import EmailAddress
from allauth.account.utils import user_pk_to_url_str
from django.conf import settings
from django.core.mail import send_mail
from django.db import transaction
from django.template.loader import render_to_string
from django.urls import reverse

from accounts.models import User
from annotation.models import Project, ProjectMembership, Role

USERNAME_MAX = 150


class InvitationRefused(Exception):
    """The invitation cannot be sent; the message says why."""


@dataclass(frozen=True, slots=True)
class Invitation:
    user: User
    user_created: bool
    membership: ProjectMembership | None
    membership_created: bool
    # Empty when the person already has a password: they were told about the project instead.
    set_password_url: str


@transaction.atomic
def user_invite(
    *,
    invited_by: User,
    email: str,
    site_url: str,
    project: Project | None = None,
    role: str = Role.ANNOTATOR,
) -> Invitation:
    """Add a person (or find them by email), put them in ``project`` and email them.

    A new person, or one who never set a password, gets a one-time link to set one; a
    person who already has a password is told about the project. Repeating an invitation
    creates nothing twice and leaves an existing role as it is. Mail goes out on commit.
    """
    email = email.strip().lower()
    user, user_created = _user_for_invite(email)
    membership, membership_created = _membership_for_invite(user, project, role)
    url = set_password_url(user, site_url) if not user.has_usable_password() else ""
    if user_created or membership_created or url:
        _send_on_commit(user=user, invited_by=invited_by, project=project, role=role, url=url, site_url=site_url)
    return Invitation(user, user_created, membership, membership_created, url)


def _user_for_invite(email: str) -> tuple[User, bool]:
    existing = User.objects.filter(email__iexact=email).first()
    if existing is not None:
        if not existing.is_active:
            raise InvitationRefused(f"The account of {email} is deactivated; reactivate it in the admin first.")
        return existing, False
    user = User(username=_free_username(email), email=email)
    # No password until the person sets one through the link.
    user.set_unusable_password()
    user.save()
    EmailAddress.objects.create(user=user, email=email, primary=True, verified=False)
    return user, True


def _free_username(email: str) -> str:
    base = email[:USERNAME_MAX]
    candidate, number = base, 1
    while User.objects.filter(username__iexact=candidate).exists():
        number += 1
        suffix = f"-{number}"
        candidate = base[: USERNAME_MAX - len(suffix)] + suffix
    return candidate


def _membership_for_invite(user: User, project: Project | None, role: str) -> tuple[ProjectMembership | None, bool]:
    if project is None:
        return None, False
    return ProjectMembership.objects.get_or_create(project=project, user=user, defaults={"role": role})


def set_password_url(user: User, site_url: str) -> str:
    """allauth's password-reset-from-key link: valid once, until PASSWORD_RESET_TIMEOUT.

    allauth checks the key with its own token generator (Django's, plus the email
    address), so the key is made with that one.
    """
    token = allauth_settings.PASSWORD_RESET_TOKEN_GENERATOR().make_token(user)
    path = reverse("account_reset_password_from_key", kwargs={"uidb36": user_pk_to_url_str(user), "key": token})
    return site_url.rstrip("/") + path


def _send_on_commit(
    *, user: User, invited_by: User, project: Project | None, role: str, url: str, site_url: str
) -> None:
    context = {
        "user": user,
        "invited_by": invited_by,
        "project": project,
        "role": Role(role).label if project else "",
        "set_password_url": url,
        "login_url": site_url.rstrip("/") + reverse("account_login"),
        "valid_days": max(1, settings.PASSWORD_RESET_TIMEOUT // 86400),
    }
    subject = render_to_string("accounts/email/invite_subject.txt", context).strip()
    body = render_to_string("accounts/email/invite_message.txt", context)
    # Only a committed invitation is announced; a rolled-back one never mails anyone.
    transaction.on_commit(partial(send_mail, subject, body, None, [user.email]))
