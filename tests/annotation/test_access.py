from __future__ import annotations

from django.core.exceptions import PermissionDenied
from django.http import Http404

from annotation.access import (
    can_import,
    dataset_get_for_user,
    datasets_importable_by,
    datasets_visible_to,
    figure_get_for_user,
    import_job_get_for_user,
    item_get_for_user,
    paper_get_for_user,
    project_get_for_user,
)
from annotation.models import Dataset, Figure, ImportJob, Paper, QAItem, Role
from tests.base import CastTestCase
from tests.factories import (
    DatasetFactory,
    FigureFactory,
    MembershipFactory,
    PaperFactory,
    ProjectFactory,
    QAItemFactory,
)


class AccessTestCase(CastTestCase):
    paper: Paper
    figure: Figure
    item: QAItem
    other_dataset: Dataset
    other_item: QAItem

    @classmethod
    def setUpTestData(cls) -> None:
        super().setUpTestData()
        cls.paper = PaperFactory.create(dataset=cls.dataset)
        cls.figure = FigureFactory.create(paper=cls.paper)
        cls.item = QAItemFactory.create(paper=cls.paper)
        cls.other_dataset = DatasetFactory.create(name="Someone else's")
        cls.other_item = QAItemFactory.create(paper=PaperFactory.create(dataset=cls.other_dataset))


class DatasetVisibilityTests(AccessTestCase):
    def test_every_project_member_sees_the_projects_dataset(self) -> None:
        for user in (self.annotator, self.annotator2, self.reviewer, self.lead):
            self.assertEqual(dataset_get_for_user(user, self.dataset.pk), self.dataset)

    def test_an_outsider_gets_404_for_a_dataset(self) -> None:
        with self.assertRaises(Http404):
            dataset_get_for_user(self.outsider, self.dataset.pk)

    def test_staff_see_every_dataset(self) -> None:
        self.assertEqual(set(datasets_visible_to(self.admin)), {self.dataset, self.other_dataset})

    def test_the_creator_sees_a_dataset_without_any_project(self) -> None:
        mine = DatasetFactory.create(created_by=self.outsider)
        self.assertEqual(list(datasets_visible_to(self.outsider)), [mine])

    def test_a_member_of_two_projects_on_one_dataset_sees_it_once(self) -> None:
        second = ProjectFactory.create(dataset=self.dataset)
        MembershipFactory.create(project=second, user=self.annotator)
        self.assertEqual(list(datasets_visible_to(self.annotator)), [self.dataset])

    def test_a_member_does_not_see_datasets_of_projects_they_are_not_in(self) -> None:
        with self.assertRaises(Http404):
            dataset_get_for_user(self.annotator, self.other_dataset.pk)


class CorpusObjectTests(AccessTestCase):
    def test_items_figures_and_papers_follow_their_dataset(self) -> None:
        self.assertEqual(item_get_for_user(self.annotator, self.item.pk), self.item)
        self.assertEqual(figure_get_for_user(self.reviewer, self.figure.pk), self.figure)
        self.assertEqual(paper_get_for_user(self.lead, self.paper.pk), self.paper)

    def test_an_outsider_gets_404_for_items_figures_and_papers(self) -> None:
        for fetch, pk in (
            (item_get_for_user, self.item.pk),
            (figure_get_for_user, self.figure.pk),
            (paper_get_for_user, self.paper.pk),
        ):
            with self.subTest(fetch=fetch.__name__), self.assertRaises(Http404):
                fetch(self.outsider, pk)

    def test_a_member_gets_404_for_an_item_of_another_dataset(self) -> None:
        with self.assertRaises(Http404):
            item_get_for_user(self.annotator, self.other_item.pk)

    def test_staff_fetch_any_item(self) -> None:
        self.assertEqual(item_get_for_user(self.admin, self.other_item.pk), self.other_item)

    def test_a_missing_item_is_404(self) -> None:
        with self.assertRaises(Http404):
            item_get_for_user(self.admin, 10**9)


class ProjectAccessTests(AccessTestCase):
    def test_a_member_gets_the_project_without_a_role_requirement(self) -> None:
        self.assertEqual(project_get_for_user(self.annotator, self.project.pk), self.project)

    def test_a_member_below_the_required_role_gets_403(self) -> None:
        with self.assertRaises(PermissionDenied):
            project_get_for_user(self.annotator, self.project.pk, role=Role.REVIEWER)
        with self.assertRaises(PermissionDenied):
            project_get_for_user(self.reviewer, self.project.pk, role=Role.LEAD)

    def test_a_higher_role_includes_the_lower_ones(self) -> None:
        self.assertEqual(project_get_for_user(self.lead, self.project.pk, role=Role.ANNOTATOR), self.project)
        self.assertEqual(project_get_for_user(self.reviewer, self.project.pk, role="reviewer"), self.project)

    def test_a_non_member_gets_404_even_when_a_role_is_asked_for(self) -> None:
        with self.assertRaises(Http404):
            project_get_for_user(self.outsider, self.project.pk, role=Role.LEAD)

    def test_staff_pass_every_role_check(self) -> None:
        self.assertEqual(project_get_for_user(self.admin, self.project.pk, role=Role.LEAD), self.project)


class ImportAccessTests(AccessTestCase):
    def _job(self, user) -> ImportJob:
        return ImportJob.objects.create(
            created_by=user, dataset_name="x", source_format="spiqa", upload="/nowhere", original_name="x.json"
        )

    def test_only_leads_and_staff_may_import(self) -> None:
        self.assertTrue(can_import(self.lead))
        self.assertTrue(can_import(self.admin))
        for user in (self.annotator, self.reviewer, self.outsider):
            self.assertFalse(can_import(user), user)

    def test_a_lead_may_add_only_to_datasets_they_lead_or_created(self) -> None:
        mine = DatasetFactory.create(created_by=self.lead)
        self.assertEqual(set(datasets_importable_by(self.lead)), {self.dataset, mine})
        self.assertEqual(list(datasets_importable_by(self.annotator)), [])

    def test_an_import_job_is_visible_to_its_creator_and_staff_only(self) -> None:
        job = self._job(self.lead)
        self.assertEqual(import_job_get_for_user(self.lead, job.pk), job)
        self.assertEqual(import_job_get_for_user(self.admin, job.pk), job)
        for user in (self.annotator, self.outsider):
            with self.subTest(user=user.username), self.assertRaises(Http404):
                import_job_get_for_user(user, job.pk)
