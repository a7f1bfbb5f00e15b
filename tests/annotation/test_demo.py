"""`make run` loads the demo; it must give every demo project a working queue, twice over."""

from __future__ import annotations

from django.core.management import call_command
from django.test import TestCase

from accounts.models import User
from annotation.demo import DEMO_PROJECTS, demo_load
from annotation.models import AnnotationStatus, Project, ProjectItem
from annotation.services.queue import lease_claim


class DemoTests(TestCase):
    @classmethod
    def setUpTestData(cls) -> None:
        demo_load()

    def test_every_demo_project_has_a_queue_and_a_lead(self) -> None:
        for demo in DEMO_PROJECTS:
            project = Project.objects.get(name=demo.name)
            self.assertEqual((project.workflow, project.overlap), (demo.workflow, demo.overlap))
            self.assertGreater(ProjectItem.objects.filter(project=project).count(), 0)
            self.assertTrue(project.memberships.filter(user__email="lead@quire.local", role="lead").exists())
            self.assertEqual(project.guidelines.count(), 1)

    def test_the_spiqa_project_takes_only_test_a(self) -> None:
        project = Project.objects.get(name="SPIQA test-A filtering")
        splits = set(ProjectItem.objects.filter(project=project).values_list("item__split", flat=True))
        self.assertEqual(splits, {"test-A"})

    def test_the_qascore_project_queues_one_entry_per_candidate_answer(self) -> None:
        project = Project.objects.get(name="QAScore rating")
        entries = ProjectItem.objects.filter(project=project)
        self.assertFalse(entries.filter(candidate__isnull=True).exists())
        self.assertEqual(entries.count(), entries.values("candidate").distinct().count())

    def test_loading_again_creates_nothing(self) -> None:
        before = (Project.objects.count(), ProjectItem.objects.count(), User.objects.count())
        call_command("load_demo", verbosity=0)
        self.assertEqual((Project.objects.count(), ProjectItem.objects.count(), User.objects.count()), before)

    def test_a_demo_annotator_can_claim_an_item(self) -> None:
        annotator = User.objects.get(email="annotator1@quire.local")
        for project in Project.objects.all():
            record = lease_claim(project=project, annotator=annotator)
            assert record is not None
            self.assertEqual(record.status, AnnotationStatus.DRAFT)
