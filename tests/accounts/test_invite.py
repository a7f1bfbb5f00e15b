from __future__ import annotations

import re

from django.core import mail
from django.urls import reverse

from accounts.models import User
from accounts.services import InvitationRefused, user_invite
from annotation.models import ProjectMembership, Role
from tests.base import CastTestCase
from tests.factories import UserFactory

SITE = "http://testserver/"


def link_in(message: mail.EmailMessage) -> str:
    found = re.search(r"http://testserver(/accounts/password/reset/key/\S+)", str(message.body))
    assert found, message.body
    return found.group(1)


class InviteServiceTests(CastTestCase):
    def invite(self, email: str = "new.person@example.org", **kwargs):
        with self.captureOnCommitCallbacks(execute=True):
            return user_invite(invited_by=self.admin, email=email, site_url=SITE, **kwargs)

    def test_it_creates_a_user_without_a_password_and_a_membership_and_mails_a_link(self) -> None:
        invitation = self.invite(project=self.project, role=Role.REVIEWER)
        user = User.objects.get(email="new.person@example.org")
        self.assertEqual(invitation.user, user)
        self.assertEqual(user.username, "new.person@example.org")
        self.assertFalse(user.has_usable_password())
        self.assertEqual(ProjectMembership.objects.get(user=user).role, Role.REVIEWER)
        self.assertEqual(len(mail.outbox), 1)
        self.assertEqual(mail.outbox[0].to, ["new.person@example.org"])
        self.assertIn("Cast project", mail.outbox[0].body)
        self.assertIn(invitation.set_password_url, mail.outbox[0].body)

    def test_an_invitation_without_a_project_creates_only_the_user(self) -> None:
        self.invite()
        user = User.objects.get(email="new.person@example.org")
        self.assertFalse(ProjectMembership.objects.filter(user=user).exists())
        self.assertEqual(len(mail.outbox), 1)

    def test_the_address_is_matched_without_regard_to_case(self) -> None:
        self.invite("New.Person@Example.org")
        again = self.invite("new.person@EXAMPLE.org", project=self.project)
        self.assertEqual(User.objects.filter(email__iexact="new.person@example.org").count(), 1)
        self.assertEqual(again.user.email, "new.person@example.org")
        self.assertFalse(again.user_created)

    def test_a_repeat_invitation_creates_nothing_twice_and_sends_a_fresh_link(self) -> None:
        self.invite(project=self.project)
        second = self.invite(project=self.project, role=Role.LEAD)
        self.assertFalse(second.user_created)
        self.assertFalse(second.membership_created)
        self.assertEqual(User.objects.filter(email="new.person@example.org").count(), 1)
        self.assertEqual(ProjectMembership.objects.get(user=second.user).role, Role.ANNOTATOR)
        self.assertEqual(len(mail.outbox), 2)

    def test_a_person_with_a_password_is_added_and_told_without_a_set_password_link(self) -> None:
        invitation = self.invite(self.outsider.email, project=self.project)
        self.assertEqual(invitation.set_password_url, "")
        self.assertTrue(ProjectMembership.objects.filter(user=self.outsider, project=self.project).exists())
        self.assertEqual(len(mail.outbox), 1)
        self.assertNotIn("/password/reset/key/", mail.outbox[0].body)
        self.assertIn("Cast project", mail.outbox[0].subject)

    def test_a_member_invited_again_gets_no_mail_and_keeps_their_role(self) -> None:
        invitation = self.invite(self.reviewer.email, project=self.project, role=Role.LEAD)
        self.assertFalse(invitation.membership_created)
        self.assertEqual(ProjectMembership.objects.get(user=self.reviewer).role, Role.REVIEWER)
        self.assertEqual(mail.outbox, [])

    def test_a_deactivated_account_is_refused(self) -> None:
        UserFactory.create(username="gone", email="gone@example.org", is_active=False)
        with self.assertRaises(InvitationRefused):
            self.invite("gone@example.org")
        self.assertEqual(mail.outbox, [])

    def test_a_username_taken_by_someone_else_gets_a_suffix(self) -> None:
        UserFactory.create(username="new.person@example.org", email="other@example.org")
        invitation = self.invite()
        self.assertEqual(invitation.user.username, "new.person@example.org-2")

    def test_nothing_is_mailed_when_the_transaction_rolls_back(self) -> None:
        with self.captureOnCommitCallbacks(execute=False) as callbacks:
            user_invite(invited_by=self.admin, email="x@example.org", site_url=SITE)
        self.assertEqual(len(callbacks), 1)
        self.assertEqual(mail.outbox, [])


class SetPasswordLinkTests(CastTestCase):
    def test_the_link_sets_a_password_once_and_the_person_can_then_sign_in(self) -> None:
        with self.captureOnCommitCallbacks(execute=True):
            user_invite(invited_by=self.admin, email="new@example.org", site_url=SITE)
        link = link_in(mail.outbox[0])
        form_page = self.client.get(link, follow=True)
        self.assertContains(form_page, 'name="password1"')
        form_url = form_page.redirect_chain[-1][0]
        new_password = "a long and unusual passphrase 7"
        response = self.client.post(form_url, {"password1": new_password, "password2": new_password})
        self.assertEqual(response.status_code, 302)
        self.assertTrue(User.objects.get(email="new@example.org").check_password(new_password))
        self.client.logout()
        used_again = self.client.get(link, follow=True)
        self.assertNotContains(used_again, 'name="password1"')
        signed_in = self.client.post(reverse("account_login"), {"login": "new@example.org", "password": new_password})
        self.assertRedirects(signed_in, reverse("home"), fetch_redirect_response=False)


class InvitePageTests(CastTestCase):
    url = "/accounts/invite/"

    def test_the_url_is_accounts_invite(self) -> None:
        self.assertEqual(reverse("user_invite"), self.url)

    def test_an_anonymous_visitor_is_sent_to_login(self) -> None:
        response = self.client.get(self.url)
        self.assertEqual(response.status_code, 302)
        self.assertTrue(response["Location"].startswith(reverse("account_login")))

    def test_everyone_but_staff_gets_404(self) -> None:
        for user in (self.annotator, self.reviewer, self.lead, self.outsider):
            self.client.force_login(user)
            with self.subTest(user=user.username):
                self.assertEqual(self.client.get(self.url).status_code, 404)
                self.assertEqual(self.client.post(self.url, {"email": "x@example.org"}).status_code, 404)
        self.assertFalse(User.objects.filter(email="x@example.org").exists())

    def test_staff_get_the_form_with_projects_and_roles(self) -> None:
        self.client.force_login(self.admin)
        response = self.client.get(self.url)
        self.assertContains(response, "Cast project")
        self.assertContains(response, '<option value="reviewer">')

    def test_staff_invite_someone_and_are_sent_back_with_a_message(self) -> None:
        self.client.force_login(self.admin)
        with self.captureOnCommitCallbacks(execute=True):
            response = self.client.post(
                self.url, {"email": "new@example.org", "project": self.project.pk, "role": "lead"}, follow=True
            )
        self.assertRedirects(response, self.url)
        self.assertContains(response, "Invited new@example.org.")
        self.assertEqual(ProjectMembership.objects.get(user__email="new@example.org").role, Role.LEAD)
        self.assertEqual(len(mail.outbox), 1)

    def test_a_repeated_post_creates_nothing_new(self) -> None:
        self.client.force_login(self.admin)
        data = {"email": "new@example.org", "project": self.project.pk, "role": "annotator"}
        self.client.post(self.url, data)
        response = self.client.post(self.url, data, follow=True)
        self.assertContains(response, "Sent a new set-password link to new@example.org.")
        self.assertEqual(User.objects.filter(email="new@example.org").count(), 1)
        self.assertEqual(ProjectMembership.objects.filter(user__email="new@example.org").count(), 1)

    def test_an_invalid_address_is_shown_back(self) -> None:
        self.client.force_login(self.admin)
        response = self.client.post(self.url, {"email": "not an address", "role": "annotator"})
        self.assertEqual(response.status_code, 200)
        self.assertContains(response, "Enter a valid email address")

    def test_other_methods_get_405(self) -> None:
        self.client.force_login(self.admin)
        self.assertEqual(self.client.put(self.url).status_code, 405)
