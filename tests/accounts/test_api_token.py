"""The API token page: a user creates, regenerates and deletes their own token; the key is
shown once, then only its first characters."""

from __future__ import annotations

from django.test import Client, TestCase
from django.urls import reverse
from rest_framework.authtoken.models import Token
from rest_framework.test import APIClient

from accounts.models import User
from accounts.token_services import api_token_delete, api_token_rotate
from tests.annotation.workbench_support import qascore_project
from tests.factories import UserFactory


class ApiTokenPageTests(TestCase):
    user: User
    other: User

    @classmethod
    def setUpTestData(cls) -> None:
        cls.user = UserFactory.create()
        cls.other = UserFactory.create()

    def setUp(self) -> None:
        self.client.force_login(self.user)
        self.url = reverse("api_token")

    def post(self, action: str) -> None:
        response = self.client.post(self.url, {"action": action})
        self.assertRedirects(response, self.url, fetch_redirect_response=False)

    def api_status(self, key: str) -> int:
        project = qascore_project(lead=self.other, members=(self.user,))
        client = APIClient()
        client.credentials(HTTP_AUTHORIZATION=f"Token {key}")
        return client.get(reverse("api_my_annotations", args=[project.pk])).status_code

    def test_a_visitor_who_is_not_signed_in_is_sent_to_the_login_page(self) -> None:
        self.client.logout()
        response = self.client.get(self.url)
        self.assertRedirects(response, f"{reverse('account_login')}?next={self.url}", fetch_redirect_response=False)
        self.client.post(self.url, {"action": "rotate"})
        self.assertFalse(Token.objects.exists())

    def test_a_user_without_a_token_is_offered_to_create_one(self) -> None:
        response = self.client.get(self.url)
        self.assertContains(response, "You have no token")
        self.assertContains(response, "Create token")
        self.assertNotContains(response, "Delete token")
        self.assertIn("no-cache", response["Cache-Control"])

    def test_a_new_token_is_shown_once_and_then_only_its_first_four_characters(self) -> None:
        self.post("rotate")
        token = Token.objects.get(user=self.user)
        first = self.client.get(self.url)
        self.assertContains(first, token.key)
        self.assertContains(first, "shown only this once")
        second = self.client.get(self.url)
        self.assertNotContains(second, token.key)
        self.assertContains(second, f"<code>{token.key[:4]}…</code>", html=True)
        self.assertContains(second, "Regenerate token")

    def test_the_new_token_authenticates_api_requests(self) -> None:
        self.post("rotate")
        self.assertEqual(self.api_status(Token.objects.get(user=self.user).key), 200)

    def test_regenerating_replaces_the_token_and_the_old_one_stops_working(self) -> None:
        self.post("rotate")
        old = Token.objects.get(user=self.user).key
        self.post("rotate")
        new = Token.objects.get(user=self.user).key
        self.assertNotEqual(old, new)
        self.assertEqual(Token.objects.filter(user=self.user).count(), 1)
        self.assertContains(self.client.get(self.url), new)
        self.assertEqual(self.api_status(old), 401)
        self.assertEqual(self.api_status(new), 200)

    def test_deleting_the_token_stops_it_working(self) -> None:
        self.post("rotate")
        key = Token.objects.get(user=self.user).key
        self.post("delete")
        self.assertFalse(Token.objects.filter(user=self.user).exists())
        page = self.client.get(self.url)
        self.assertContains(page, "You have no token")
        self.assertNotContains(page, key)
        self.assertEqual(self.api_status(key), 401)

    def test_a_key_made_and_deleted_before_the_page_was_seen_is_never_shown(self) -> None:
        self.post("rotate")
        key = Token.objects.get(user=self.user).key
        api_token_delete(user=self.user)
        self.assertNotContains(self.client.get(self.url), key)

    def test_deleting_when_there_is_no_token_changes_nothing(self) -> None:
        self.post("delete")
        self.assertFalse(Token.objects.exists())
        self.assertContains(self.client.get(self.url), "You have no token")

    def test_an_unknown_action_changes_nothing(self) -> None:
        token = api_token_rotate(user=self.user)
        self.post("steal")
        self.assertEqual(Token.objects.get(user=self.user).key, token.key)
        self.assertContains(self.client.get(self.url), "Choose to create, regenerate or delete the token.")

    def test_a_user_never_sees_or_changes_another_users_token(self) -> None:
        theirs = api_token_rotate(user=self.other)
        self.post("rotate")
        mine = Token.objects.get(user=self.user)
        self.assertNotContains(self.client.get(self.url), theirs.key)
        self.post("delete")
        self.assertTrue(Token.objects.filter(user=self.other, key=theirs.key).exists())
        self.assertFalse(Token.objects.filter(key=mine.key).exists())

    def test_wrong_methods_get_405(self) -> None:
        for response in (self.client.put(self.url), self.client.delete(self.url)):
            self.assertEqual(response.status_code, 405)
        self.assertFalse(Token.objects.exists())

    def test_a_post_without_the_csrf_token_is_refused(self) -> None:
        client = Client(enforce_csrf_checks=True)
        client.force_login(self.user)
        response = client.post(self.url, {"action": "rotate"})
        self.assertEqual(response.status_code, 403)
        self.assertFalse(Token.objects.exists())


class ApiTokenServiceTests(TestCase):
    def test_rotating_keeps_one_token_per_user_with_a_new_key(self) -> None:
        user = UserFactory.create()
        keys = {api_token_rotate(user=user).key for _ in range(3)}
        self.assertEqual(len(keys), 3)
        self.assertEqual(Token.objects.filter(user=user).count(), 1)
        self.assertEqual(len(Token.objects.get(user=user).key), 40)
