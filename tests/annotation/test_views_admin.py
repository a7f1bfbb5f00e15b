from __future__ import annotations

from django.contrib import admin
from django.db.models import Model
from django.urls import reverse

from accounts.models import User
from annotation.models import (
    CandidateAnswer,
    Evidence,
    Figure,
    ImportJob,
    Paper,
    PaperCluster,
    Project,
    ProjectItem,
    ProjectMembership,
    QAItem,
)
from annotation.services.projects import assignment_create
from annotation.services.queue import annotation_submit, lease_claim
from tests.annotation.workbench_support import spiqa_keep, spiqa_project
from tests.base import CastTestCase
from tests.factories import CandidateAnswerFactory, FigureFactory, PaperFactory, QAItemFactory
from tests.web_support import count_queries


def changelist(model: type[Model]) -> str:
    return reverse(f"admin:{model._meta.app_label}_{model._meta.model_name}_changelist")


class AdminTestCase(CastTestCase):
    def add_corpus_rows(self, count: int) -> None:
        for _ in range(count):
            paper = PaperFactory.create(dataset=self.dataset)
            figure = FigureFactory.create(paper=paper)
            item = QAItemFactory.create(paper=paper)
            Evidence.objects.create(item=item, figure=figure)
            CandidateAnswerFactory.create(item=item)
            PaperCluster.objects.create(dataset=self.dataset, anchor=paper)
            ImportJob.objects.create(
                created_by=self.lead, dataset_name="d", source_format="spiqa", upload="/x", original_name="x.json"
            )
            self.add_queue_rows()

    def add_queue_rows(self) -> None:
        """A project with a guideline, an assignment, and one submitted annotation with its revision."""
        project = spiqa_project(lead=self.lead, members=(self.annotator,), papers=1, per_paper=1)
        first = ProjectItem.objects.filter(project=project).select_related("paper").first()
        assert first is not None
        assert first.paper is not None
        assignment_create(
            project=project, annotator=self.annotator, assigned_by=self.lead, paper_ids=[first.paper.external_id]
        )
        record = lease_claim(project=project, annotator=self.annotator)
        assert record is not None
        annotation_submit(
            project=project,
            project_item_id=record.project_item_id,
            annotator=self.annotator,
            payload=spiqa_keep(record.project_item),
        )


class AdminPagesTests(AdminTestCase):
    def test_every_model_is_registered(self) -> None:
        for model in (User, Paper, Figure, QAItem, Evidence, CandidateAnswer, PaperCluster, Project, ImportJob):
            self.assertIn(model, admin.site._registry)
        self.assertNotIn(ProjectMembership, admin.site._registry)

    def test_staff_open_every_changelist_and_change_form(self) -> None:
        self.add_corpus_rows(1)
        self.client.force_login(self.admin)
        for model in admin.site._registry:
            if model._meta.app_label not in ("accounts", "annotation"):
                continue
            with self.subTest(model=model.__name__):
                self.assertEqual(self.client.get(changelist(model)).status_code, 200)
                row = model.objects.first()  # type: ignore[attr-defined]
                assert row is not None
                meta = model._meta
                change = reverse(f"admin:{meta.app_label}_{meta.model_name}_change", args=[row.pk])
                self.assertEqual(self.client.get(change).status_code, 200)

    def test_project_members_are_edited_inline_on_the_project(self) -> None:
        self.client.force_login(self.admin)
        response = self.client.get(reverse("admin:annotation_project_change", args=[self.project.pk]))
        self.assertContains(response, "memberships-TOTAL_FORMS")

    def test_people_who_are_not_staff_are_sent_to_the_admin_login(self) -> None:
        self.client.force_login(self.lead)
        self.assertEqual(self.client.get(changelist(QAItem)).status_code, 302)

    def test_a_user_added_in_the_admin_gets_a_lower_case_email(self) -> None:
        self.client.force_login(self.admin)
        response = self.client.post(
            reverse("admin:accounts_user_add"),
            {
                "username": "added",
                "email": "Added@Example.org",
                "usable_password": "true",
                "password1": "a long and unusual passphrase 7",
                "password2": "a long and unusual passphrase 7",
            },
        )
        self.assertEqual(response.status_code, 302)
        self.assertEqual(User.objects.get(username="added").email, "added@example.org")


class AdminQueryCountTests(AdminTestCase):
    def test_changelists_run_a_fixed_number_of_queries_however_many_rows(self) -> None:
        self.client.force_login(self.admin)
        self.add_corpus_rows(3)
        models = (User, Paper, Figure, QAItem, Evidence, CandidateAnswer, PaperCluster, Project, ImportJob)
        few = {model: count_queries(lambda model=model: self.client.get(changelist(model))) for model in models}
        self.add_corpus_rows(27)
        for model in models:
            with self.subTest(model=model.__name__), self.assertNumQueries(few[model]):
                self.client.get(changelist(model))
