"""The scripted-annotation API over real HTTP with a real token: claim, submit, list mine,
the OpenAPI schema and its docs page."""

from __future__ import annotations

import json
import os
import re
from datetime import timedelta
from typing import Any

import pytest
from django.conf import settings
from django.contrib.staticfiles import finders
from django.contrib.staticfiles.testing import StaticLiveServerTestCase
from django.test import TestCase
from django.urls import reverse
from django.utils import timezone
from drf_spectacular.validation import validate_schema
from rest_framework.authtoken.models import Token
from rest_framework.test import APIClient

from accounts.models import User
from annotation.models import (
    Annotation,
    AnnotationRevision,
    AnnotationStatus,
    Project,
    ProjectItem,
    ProjectMembership,
    QAItem,
    Role,
)
from annotation.services.queue import annotation_submit, lease_claim
from annotation.workflows import workflow_choices
from tests.annotation.workbench_support import qascore_full_marks, qascore_project, spiqa_keep, spiqa_project
from tests.conftest import CHROMIUM
from tests.e2e.browser_support import CHROMIUM_FLAGS
from tests.factories import ProjectFactory, QAItemFactory, UserFactory


class ApiTestCase(TestCase):
    lead: User
    annotator: User
    annotator2: User
    outsider: User

    @classmethod
    def setUpTestData(cls) -> None:
        cls.lead = UserFactory.create()
        cls.annotator = UserFactory.create()
        cls.annotator2 = UserFactory.create()
        cls.outsider = UserFactory.create()

    def api(self, user: User | None) -> APIClient:
        client = APIClient()
        if user is not None:
            token, _ = Token.objects.get_or_create(user=user)
            client.credentials(HTTP_AUTHORIZATION=f"Token {token.key}")
        return client

    def spiqa(self, **settings: Any) -> Project:
        settings.setdefault("members", (self.annotator, self.annotator2))
        return spiqa_project(lead=self.lead, **settings)

    def qascore(self, **settings: Any) -> Project:
        settings.setdefault("members", (self.annotator, self.annotator2))
        return qascore_project(lead=self.lead, **settings)

    def claim(self, project: Project, user: User) -> Any:
        return self.api(user).post(reverse("api_claim", args=[project.pk]))

    def submit(self, project: Project, user: User, project_item_id: int, body: dict[str, Any]) -> Any:
        url = reverse("api_submit", args=[project.pk, project_item_id])
        return self.api(user).post(url, body, format="json")

    def mine(self, project: Project, user: User, **params: Any) -> Any:
        return self.api(user).get(reverse("api_my_annotations", args=[project.pk]), params)


class ClaimApiTests(ApiTestCase):
    def test_an_annotator_claims_the_next_spiqa_item_with_its_question_and_paper(self) -> None:
        project = self.spiqa()
        response = self.claim(project, self.annotator)
        self.assertEqual(response.status_code, 200)
        body = response.json()
        record = Annotation.objects.get(project=project, annotator=self.annotator)
        first = ProjectItem.objects.select_related("item__paper").get(project=project, position=0)
        self.assertEqual(body["annotation"], record.pk)
        self.assertEqual(body["project_item"], first.pk)
        self.assertEqual(body["status"], "draft")
        self.assertEqual(body["payload"], {})
        self.assertEqual(body["guideline_version"], 1)
        assert record.lease_expires_at is not None
        self.assertEqual(body["lease_expires_at"], record.lease_expires_at.isoformat().replace("+00:00", "Z"))
        assert first.item.paper is not None
        self.assertEqual(
            body["item"],
            {
                "id": first.item.pk,
                "external_id": first.item.external_id,
                "split": first.item.split,
                "question": first.item.question,
                "answer": first.item.answer,
                "paper": first.item.paper.external_id,
                "candidate": None,
                "shown": {},
                "figures": [
                    f"{first.item.paper.external_id}-Figure1-1.png",
                    f"{first.item.paper.external_id}-Table1-1.png",
                ],
            },
        )

    def test_claiming_again_before_submitting_returns_the_same_item(self) -> None:
        project = self.spiqa()
        first = self.claim(project, self.annotator).json()
        again = self.claim(project, self.annotator).json()
        self.assertEqual(again["annotation"], first["annotation"])
        self.assertEqual(Annotation.objects.filter(annotator=self.annotator).count(), 1)

    def test_a_qascore_claim_carries_the_candidate_answer_and_no_paper(self) -> None:
        project = self.qascore()
        body = self.claim(project, self.annotator).json()
        project_item = ProjectItem.objects.select_related("candidate").get(pk=body["project_item"])
        assert project_item.candidate is not None
        self.assertIsNone(body["item"]["paper"])
        self.assertEqual(body["item"]["figures"], [])
        self.assertEqual(
            body["item"]["candidate"],
            {
                "id": project_item.candidate.pk,
                "system_name": "model-a",
                "text": "The peak becomes taller and sharper. It is narrow.",
            },
        )

    def test_the_guideline_version_is_null_when_the_project_has_no_guidelines(self) -> None:
        project = ProjectFactory.create()
        ProjectMembership.objects.create(project=project, user=self.annotator, role=Role.ANNOTATOR)
        item = QAItemFactory.create(dataset=project.dataset, paper=None)
        ProjectItem.objects.create(project=project, item=item, position=0, capacity=1)
        body = self.claim(project, self.annotator).json()
        self.assertIsNone(body["guideline_version"])
        self.assertIsNone(body["item"]["paper"])

    def test_it_answers_204_when_nothing_is_left(self) -> None:
        project = self.spiqa(papers=1, per_paper=1)
        self.assertEqual(self.claim(project, self.annotator).status_code, 200)
        response = self.claim(project, self.annotator2)
        self.assertEqual(response.status_code, 204)
        self.assertEqual(response.content, b"")

    def test_a_claim_takes_the_same_number_of_queries_early_and_late_in_the_queue(self) -> None:
        project = self.spiqa(papers=3, per_paper=3)
        client = self.api(self.annotator)
        url = reverse("api_claim", args=[project.pk])
        with self.assertNumQueries(14):
            first = client.post(url).json()
        for position in range(1, 6):
            record = lease_claim(project=project, annotator=self.annotator)
            assert record is not None
            annotation_submit(
                project=project,
                project_item_id=record.project_item_id,
                annotator=self.annotator,
                payload=spiqa_keep(record.project_item),
            )
            self.assertEqual(record.project_item.position, position - 1)
        with self.assertNumQueries(14):
            late = client.post(url).json()
        self.assertNotEqual(first["project_item"], late["project_item"])


class SubmitApiTests(ApiTestCase):
    def test_an_annotator_claims_and_submits_a_spiqa_item(self) -> None:
        project = self.spiqa()
        claimed = self.claim(project, self.annotator).json()
        payload = spiqa_keep(ProjectItem.objects.get(pk=claimed["project_item"]))
        response = self.submit(
            project,
            self.annotator,
            claimed["project_item"],
            {"payload": payload, "client_token": "spiqa-1", "active_ms": 4200},
        )
        self.assertEqual(response.status_code, 201)
        self.assertEqual(response.json(), {"annotation": claimed["annotation"], "revision": 1, "result": "stored"})
        record = Annotation.objects.get(pk=claimed["annotation"])
        self.assertEqual(record.status, AnnotationStatus.SUBMITTED)
        self.assertEqual(record.payload["evidence_figures"], payload["evidence_figures"])
        self.assertEqual(record.payload["decision"], "keep")
        self.assertEqual(record.active_ms, 4200)
        self.assertEqual(ProjectItem.objects.get(pk=claimed["project_item"]).submitted_count, 1)

    def test_an_annotator_claims_and_submits_a_qascore_item(self) -> None:
        project = self.qascore()
        claimed = self.claim(project, self.annotator).json()
        payload = {"extracted_answer": "taller; sharper", "no_answer": False, "score": 0.5, "note": ""}
        response = self.submit(project, self.annotator, claimed["project_item"], {"payload": payload})
        self.assertEqual(response.status_code, 201)
        self.assertEqual(response.json()["result"], "stored")
        record = Annotation.objects.get(pk=claimed["annotation"])
        self.assertEqual(record.status, AnnotationStatus.SUBMITTED)
        self.assertEqual(
            record.payload, {"extracted_answer": "taller; sharper", "no_answer": False, "score": 0.5, "note": ""}
        )

    def test_a_replay_with_the_same_client_token_stores_one_revision(self) -> None:
        project = self.qascore()
        claimed = self.claim(project, self.annotator).json()
        body = {"payload": qascore_full_marks(), "client_token": "retry-me"}
        first = self.submit(project, self.annotator, claimed["project_item"], body)
        second = self.submit(project, self.annotator, claimed["project_item"], body)
        self.assertEqual(first.status_code, 201)
        self.assertEqual(second.status_code, 200)
        self.assertEqual(second.json(), {"annotation": claimed["annotation"], "revision": 1, "result": "replayed"})
        self.assertEqual(AnnotationRevision.objects.filter(annotation_id=claimed["annotation"]).count(), 1)
        self.assertEqual(ProjectItem.objects.get(pk=claimed["project_item"]).submitted_count, 1)

    def test_a_replay_reports_the_revision_its_token_stored_after_a_later_edit(self) -> None:
        project = self.qascore()
        claimed = self.claim(project, self.annotator).json()
        item_id = claimed["project_item"]
        self.submit(project, self.annotator, item_id, {"payload": qascore_full_marks(), "client_token": "a"})
        edit = {**qascore_full_marks(), "score": 0}
        edited = self.submit(project, self.annotator, item_id, {"payload": edit, "client_token": "b"})
        self.assertEqual((edited.status_code, edited.json()["revision"]), (201, 2))
        replay = self.submit(project, self.annotator, item_id, {"payload": qascore_full_marks(), "client_token": "a"})
        self.assertEqual((replay.status_code, replay.json()["revision"]), (200, 1))
        self.assertEqual(Annotation.objects.get(pk=claimed["annotation"]).payload["score"], 0.0)

    def test_a_payload_that_breaks_the_workflow_rules_answers_400_with_the_field_errors(self) -> None:
        project = self.spiqa()
        claimed = self.claim(project, self.annotator).json()
        payload = {**spiqa_keep(ProjectItem.objects.get(pk=claimed["project_item"])), "evidence_figures": []}
        response = self.submit(project, self.annotator, claimed["project_item"], {"payload": payload})
        self.assertEqual(response.status_code, 400)
        body = response.json()
        self.assertEqual(body["detail"], "The annotation is not complete.")
        self.assertEqual(list(body["errors"]), ["evidence_figures"])
        record = Annotation.objects.get(pk=claimed["annotation"])
        self.assertEqual((record.status, record.revision_count), (AnnotationStatus.DRAFT, 0))

    def test_a_qascore_payload_without_an_answer_or_score_lists_each_error(self) -> None:
        project = self.qascore()
        claimed = self.claim(project, self.annotator).json()
        response = self.submit(project, self.annotator, claimed["project_item"], {"payload": {"no_answer": False}})
        self.assertEqual(response.status_code, 400)
        self.assertEqual(set(response.json()["errors"]), {"extracted_answer", "score"})

    def test_a_malformed_request_answers_400_with_errors_per_field(self) -> None:
        project = self.qascore()
        claimed = self.claim(project, self.annotator).json()
        item_id = claimed["project_item"]
        for body, field in (
            ({}, "payload"),
            ({"payload": ["not", "an", "object"]}, "payload"),
            ({"payload": qascore_full_marks(), "client_token": "x" * 65}, "client_token"),
            ({"payload": qascore_full_marks(), "active_ms": -1}, "active_ms"),
        ):
            with self.subTest(field=field, body=body):
                response = self.submit(project, self.annotator, item_id, body)
                self.assertEqual(response.status_code, 400)
                self.assertEqual(response.json()["detail"], "The request is not valid.")
                self.assertIn(field, response.json()["errors"])
        self.assertEqual(AnnotationRevision.objects.count(), 0)

    def test_a_body_that_is_not_json_is_refused(self) -> None:
        project = self.qascore()
        claimed = self.claim(project, self.annotator).json()
        url = reverse("api_submit", args=[project.pk, claimed["project_item"]])
        response = self.api(self.annotator).post(url, {"payload": "score=1"}, format="multipart")
        self.assertEqual(response.status_code, 415)
        broken = self.api(self.annotator).post(url, "{not json", content_type="application/json")
        self.assertEqual(broken.status_code, 400)

    def test_a_submit_to_a_full_item_answers_409_and_keeps_the_work_as_a_draft(self) -> None:
        project = self.spiqa(papers=1, per_paper=1, overlap=1)
        first = self.claim(project, self.annotator).json()
        # The first lease runs out, so the item goes to annotator2, who submits it.
        later = timezone.now() + timedelta(seconds=project.lease_seconds + 1)
        taken = lease_claim(project=project, annotator=self.annotator2, now=later)
        assert taken is not None
        self.assertEqual(taken.project_item_id, first["project_item"])
        payload = spiqa_keep(taken.project_item)
        stored = self.submit(project, self.annotator2, taken.project_item_id, {"payload": payload})
        self.assertEqual(stored.status_code, 201)
        late = self.submit(project, self.annotator, first["project_item"], {"payload": payload, "client_token": "t"})
        self.assertEqual(late.status_code, 409)
        self.assertEqual(late.json()["result"], "full")
        self.assertIn("kept as a draft", late.json()["detail"])
        record = Annotation.objects.get(pk=first["annotation"])
        self.assertEqual((record.status, record.payload["decision"]), (AnnotationStatus.DRAFT, "keep"))
        self.assertEqual(ProjectItem.objects.get(pk=first["project_item"]).submitted_count, 1)

    def test_a_submit_to_a_locked_item_answers_409(self) -> None:
        project = self.qascore()
        claimed = self.claim(project, self.annotator).json()
        ProjectItem.objects.filter(pk=claimed["project_item"]).update(locked_at=timezone.now(), locked_by=self.lead)
        response = self.submit(project, self.annotator, claimed["project_item"], {"payload": qascore_full_marks()})
        self.assertEqual(response.status_code, 409)
        self.assertEqual(response.json(), {"detail": response.json()["detail"], "errors": {}})
        self.assertIn("locked", response.json()["detail"])
        self.assertEqual(Annotation.objects.get(pk=claimed["annotation"]).status, AnnotationStatus.DRAFT)

    def test_a_submit_to_an_item_never_claimed_answers_409(self) -> None:
        project = self.qascore()
        claimed = self.claim(project, self.annotator).json()
        response = self.submit(project, self.annotator2, claimed["project_item"], {"payload": qascore_full_marks()})
        self.assertEqual(response.status_code, 409)
        self.assertIn("Claim this item first", response.json()["detail"])
        self.assertFalse(Annotation.objects.filter(annotator=self.annotator2).exists())

    def test_a_submit_to_an_item_of_another_project_answers_404(self) -> None:
        project = self.qascore()
        other = self.spiqa()
        foreign = ProjectItem.objects.filter(project=other).first()
        assert foreign is not None
        response = self.submit(project, self.annotator, foreign.pk, {"payload": qascore_full_marks()})
        self.assertEqual(response.status_code, 404)
        self.assertEqual(response.json()["detail"], "This item is not in the project.")


class ListMineApiTests(ApiTestCase):
    def test_an_annotator_sees_only_their_own_annotations_never_another_annotators(self) -> None:
        project = self.qascore(overlap=2)
        for user, note in ((self.annotator, "mine"), (self.annotator2, "annotator2-secret")):
            claimed = self.claim(project, user).json()
            payload = {**qascore_full_marks(), "note": note}
            self.assertEqual(self.submit(project, user, claimed["project_item"], {"payload": payload}).status_code, 201)
        self.claim(project, self.annotator2)
        response = self.mine(project, self.annotator)
        self.assertEqual(response.status_code, 200)
        self.assertNotIn("annotator2-secret", response.content.decode())
        body = response.json()
        self.assertEqual(body["count"], 1)
        [row] = body["results"]
        record = Annotation.objects.select_related("project_item__item", "project_item__candidate").get(
            annotator=self.annotator
        )
        assert record.project_item.candidate is not None
        assert record.submitted_at is not None
        self.assertEqual(
            row,
            {
                "annotation": record.pk,
                "project_item": record.project_item_id,
                "external_id": record.project_item.item.external_id,
                "candidate": {"id": record.project_item.candidate.pk, "system_name": "model-a"},
                "status": "submitted",
                "payload": {"extracted_answer": "taller and sharper", "no_answer": False, "score": 1.0, "note": "mine"},
                "guideline_version": 1,
                "active_ms": 0,
                "submitted_at": record.submitted_at.isoformat().replace("+00:00", "Z"),
                "updated_at": record.updated_at.isoformat().replace("+00:00", "Z"),
                "revision_count": 1,
            },
        )
        theirs = self.mine(project, self.annotator2).json()
        self.assertEqual(theirs["count"], 2)
        self.assertNotIn('"mine"', json.dumps(theirs))

    def test_the_status_filter_picks_drafts_submitted_or_skipped(self) -> None:
        project = self.qascore()
        claimed = self.claim(project, self.annotator).json()
        self.submit(project, self.annotator, claimed["project_item"], {"payload": qascore_full_marks()})
        draft = self.claim(project, self.annotator).json()
        counts = {name: self.mine(project, self.annotator, status=name).json()["count"] for name in AnnotationStatus}
        self.assertEqual(counts, {"draft": 1, "submitted": 1, "skipped": 0})
        drafts = self.mine(project, self.annotator, status="draft").json()["results"]
        self.assertEqual([row["annotation"] for row in drafts], [draft["annotation"]])

    def test_an_unknown_status_answers_400(self) -> None:
        project = self.qascore()
        response = self.mine(project, self.annotator, status="gold")
        self.assertEqual(response.status_code, 400)
        self.assertIn("status", response.json()["errors"])

    def test_pages_hold_50_by_default_and_page_size_up_to_200_in_the_same_number_of_queries(self) -> None:
        project = self.qascore(items=1)
        _many_records(project, self.annotator, 230)
        client = self.api(self.annotator)
        url = reverse("api_my_annotations", args=[project.pk])
        with self.assertNumQueries(4):
            small = client.get(url, {"page_size": 5}).json()
        with self.assertNumQueries(4):
            large = client.get(url, {"page_size": 1000}).json()
        default = client.get(url).json()
        self.assertEqual((small["count"], len(small["results"])), (230, 5))
        self.assertEqual(len(large["results"]), 200)
        self.assertEqual(len(default["results"]), 50)
        self.assertIn("page=2", default["next"])
        last = client.get(url, {"page": 5}).json()
        self.assertEqual((len(last["results"]), last["next"]), (30, None))


def _many_records(project: Project, annotator: User, count: int) -> None:
    """``count`` submitted records of ``annotator``, on as many new items of ``project``."""
    items = QAItem.objects.bulk_create(
        QAItem(dataset=project.dataset, split="test", external_id=f"bulk-{n}", question=f"Q{n}?") for n in range(count)
    )
    project_items = ProjectItem.objects.bulk_create(
        ProjectItem(project=project, item=item, position=1000 + n, capacity=1) for n, item in enumerate(items)
    )
    Annotation.objects.bulk_create(
        Annotation(
            project=project,
            project_item=project_item,
            annotator=annotator,
            status=AnnotationStatus.SUBMITTED,
            payload=qascore_full_marks(),
            submitted_at=timezone.now(),
            revision_count=1,
        )
        for project_item in project_items
    )


class ApiAccessTests(ApiTestCase):
    def test_an_outsider_gets_a_json_404_from_every_operation(self) -> None:
        project = self.qascore()
        claimed = self.claim(project, self.annotator).json()
        client = self.api(self.outsider)
        for response in (
            client.post(reverse("api_claim", args=[project.pk])),
            client.post(
                reverse("api_submit", args=[project.pk, claimed["project_item"]]),
                {"payload": qascore_full_marks()},
                format="json",
            ),
            client.get(reverse("api_my_annotations", args=[project.pk])),
        ):
            with self.subTest(url=response.request["PATH_INFO"]):
                self.assertEqual(response.status_code, 404)
                self.assertEqual(response["Content-Type"], "application/json")
                self.assertEqual(response.json(), {"detail": "No such project."})
        self.assertFalse(Annotation.objects.filter(annotator=self.outsider).exists())

    def test_a_member_of_one_project_gets_404_for_a_project_they_are_not_in(self) -> None:
        theirs = self.qascore()
        other = qascore_project(lead=self.lead, members=(self.outsider,))
        self.assertEqual(self.claim(theirs, self.annotator).status_code, 200)
        self.assertEqual(self.claim(other, self.annotator).status_code, 404)
        self.assertEqual(self.mine(other, self.annotator).status_code, 404)
        self.assertEqual(self.api(self.annotator).post(reverse("api_claim", args=[999_999])).status_code, 404)

    def test_a_request_without_a_token_gets_401_with_the_token_scheme(self) -> None:
        project = self.qascore()
        for response in (
            self.api(None).post(reverse("api_claim", args=[project.pk])),
            self.api(None).get(reverse("api_my_annotations", args=[project.pk])),
        ):
            self.assertEqual(response.status_code, 401)
            self.assertEqual(response["WWW-Authenticate"], "Token")
        self.assertFalse(Annotation.objects.exists())

    def test_an_unknown_token_gets_401(self) -> None:
        project = self.qascore()
        client = APIClient()
        client.credentials(HTTP_AUTHORIZATION="Token " + "0" * 40)
        response = client.post(reverse("api_claim", args=[project.pk]))
        self.assertEqual(response.status_code, 401)
        self.assertEqual(response.json()["detail"], "Invalid token.")

    def test_wrong_methods_get_405(self) -> None:
        project = self.qascore()
        client = self.api(self.annotator)
        claim_url = reverse("api_claim", args=[project.pk])
        submit_url = reverse("api_submit", args=[project.pk, 1])
        mine_url = reverse("api_my_annotations", args=[project.pk])
        for response in (
            client.get(claim_url),
            client.put(claim_url),
            client.get(submit_url),
            client.delete(submit_url),
            client.post(mine_url),
        ):
            with self.subTest(method=response.request["REQUEST_METHOD"], url=response.request["PATH_INFO"]):
                self.assertEqual(response.status_code, 405)
        self.assertFalse(Annotation.objects.exists())

    def test_a_signed_in_browser_session_may_read_but_must_send_the_csrf_token_to_write(self) -> None:
        project = self.qascore()
        client = APIClient(enforce_csrf_checks=True)
        client.force_login(self.annotator)
        self.assertEqual(client.get(reverse("api_my_annotations", args=[project.pk])).status_code, 200)
        response = client.post(reverse("api_claim", args=[project.pk]))
        self.assertEqual(response.status_code, 403)
        self.assertIn("CSRF", response.json()["detail"])
        self.assertFalse(Annotation.objects.exists())


class SchemaAndDocsTests(TestCase):
    def setUp(self) -> None:
        self.client.force_login(UserFactory.create())

    def test_the_schema_and_docs_are_for_signed_in_people_only(self) -> None:
        self.client.logout()
        for name in ("api_schema", "api_docs"):
            with self.subTest(name=name):
                self.assertEqual(self.client.get(reverse(name)).status_code, 401)

    def test_the_schema_is_valid_openapi_with_the_three_operations(self) -> None:
        response = self.client.get(reverse("api_schema"), {"format": "json"})
        self.assertEqual(response.status_code, 200)
        schema = json.loads(response.content)
        validate_schema(schema)
        self.assertTrue(schema["openapi"].startswith("3."))
        operations = {
            operation["operationId"]: (path, method)
            for path, methods in schema["paths"].items()
            for method, operation in methods.items()
        }
        self.assertEqual(
            operations,
            {
                "claim_next_item": ("/api/projects/{project_id}/claim/", "post"),
                "submit_annotation": ("/api/projects/{project_id}/items/{project_item_id}/submit/", "post"),
                "list_my_annotations": ("/api/projects/{project_id}/annotations/mine/", "get"),
            },
        )
        submit = schema["paths"]["/api/projects/{project_id}/items/{project_item_id}/submit/"]["post"]
        self.assertEqual(set(submit["responses"]), {"200", "201", "400", "401", "404", "409"})
        # The workflows that describe their payload keep their examples as Markdown code blocks.
        self.assertIn('\n    {"answerable_from_figure": "yes", "decision": "keep"', submit["description"])
        self.assertIn(
            '\n    {"extracted_answer": "taller and sharper", "no_answer": false, "score": 0.5', submit["description"]
        )
        # The others' fields are listed from their forms, so a new plug-in is never missing.
        for name, _label in workflow_choices():
            self.assertIn(f"**{name}**", submit["description"])
        relevance = '`relevance` (always required): one of "relevant", "irrelevant", "ambiguous"'
        self.assertIn(relevance, submit["description"])
        self.assertEqual(
            set(submit["requestBody"]["content"]["application/json"]["examples"]), {"SpiqaFilter", "QascoreRating"}
        )
        self.assertIn("tokenAuth", schema["components"]["securitySchemes"])

    def test_the_schema_is_served_as_yaml_by_default(self) -> None:
        response = self.client.get(reverse("api_schema"))
        self.assertEqual(response.status_code, 200)
        self.assertTrue(response["Content-Type"].startswith("application/vnd.oai.openapi"))
        self.assertIn(b"operationId: claim_next_item", response.content)

    def test_the_docs_page_loads_swagger_ui_from_local_static_files_with_no_inline_script_or_style(self) -> None:
        response = self.client.get(reverse("api_docs"))
        self.assertEqual(response.status_code, 200)
        self.assertIn("script-src 'self'", response["Content-Security-Policy"])
        html = response.content.decode()
        scripts = re.findall(r"<script\b([^>]*)>(.*?)</script>", html, flags=re.DOTALL)
        self.assertEqual(len(scripts), 3)
        sources = []
        for attributes, body in scripts:
            self.assertEqual(body.strip(), "")
            source = re.search(r'\bsrc="([^"]+)"', attributes)
            assert source is not None
            sources.append(source.group(1).replace("&amp;", "&"))
        self.assertNotRegex(html, r"<style\b|\sstyle=|\son[a-z]+=")
        self.assertNotIn("//", "".join(sources + re.findall(r'href="([^"]+)"', html)))
        bundle, preset, init = sources
        self.assertEqual(bundle, "/static/drf_spectacular_sidecar/swagger-ui-dist/swagger-ui-bundle.js")
        self.assertEqual(preset, "/static/drf_spectacular_sidecar/swagger-ui-dist/swagger-ui-standalone-preset.js")
        for static_path in (bundle, preset, "/static/drf_spectacular_sidecar/swagger-ui-dist/swagger-ui.css"):
            self.assertIsNotNone(finders.find(static_path.removeprefix("/static/")), static_path)
        script = self.client.get(init)
        self.assertEqual(script.status_code, 200)
        self.assertEqual(script["Content-Type"], "application/javascript")
        self.assertIn("SwaggerUIBundle(", script.content.decode())
        self.assertIn(reverse("api_schema"), script.content.decode())


@pytest.mark.browser
class DocsPageBrowserTests(StaticLiveServerTestCase):
    """Swagger UI must run under the CSP: a blocked script, style or eval shows as a console error."""

    def test_the_docs_page_renders_the_operations_in_chromium_without_csp_violations(self) -> None:
        from playwright.sync_api import expect, sync_playwright

        os.environ["DJANGO_ALLOW_ASYNC_UNSAFE"] = "true"
        self.addCleanup(os.environ.pop, "DJANGO_ALLOW_ASYNC_UNSAFE", None)
        problems: list[str] = []
        with sync_playwright() as playwright:
            browser = playwright.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_FLAGS)
            self.client.force_login(UserFactory.create())
            session = self.client.cookies[settings.SESSION_COOKIE_NAME].value
            context = browser.new_context()
            context.add_cookies([{"name": settings.SESSION_COOKIE_NAME, "value": session, "url": self.live_server_url}])
            page = context.new_page()
            page.on("console", lambda message: problems.append(message.text) if message.type == "error" else None)
            page.on("pageerror", lambda error: problems.append(str(error)))
            page.goto(self.live_server_url + reverse("api_docs"))
            for summary in ("Claim the next item", "Submit an annotation", "List my annotations"):
                expect(page.locator(".opblock-summary-description", has_text=summary)).to_be_visible()
            expect(page.locator(".swagger-ui .btn.authorize")).to_be_visible()
            # Opening an operation renders its request body, examples and responses.
            page.locator(".opblock-summary-description", has_text="Submit an annotation").click()
            expect(page.locator(".opblock-body").get_by_text("qascore_rating").first).to_be_visible()
            browser.close()
        self.assertEqual(problems, [], "the browser reported errors (a CSP violation shows up here)")
