"""The fixed cast every view test uses: one project on one dataset, and people around it."""

from __future__ import annotations

from django.test import TestCase

from accounts.models import User
from annotation.models import Dataset, Project, Role
from tests.factories import DatasetFactory, MembershipFactory, ProjectFactory, UserFactory

PASSWORD = "correct horse battery staple"


class CastTestCase(TestCase):
    """annotator, annotator2, reviewer and lead belong to ``project``; admin is staff;
    outsider belongs to no project at all."""

    dataset: Dataset
    project: Project
    annotator: User
    annotator2: User
    reviewer: User
    lead: User
    admin: User
    outsider: User

    @classmethod
    def setUpTestData(cls) -> None:
        cls.dataset = DatasetFactory.create(name="Cast dataset")
        cls.project = ProjectFactory.create(name="Cast project", dataset=cls.dataset)
        cls.annotator = UserFactory.create(username="annotator", email="annotator@example.org")
        cls.annotator2 = UserFactory.create(username="annotator2", email="annotator2@example.org")
        cls.reviewer = UserFactory.create(username="reviewer", email="reviewer@example.org")
        cls.lead = UserFactory.create(username="lead", email="lead@example.org")
        cls.admin = UserFactory.create(username="admin", email="admin@example.org", is_staff=True, is_superuser=True)
        cls.outsider = UserFactory.create(username="outsider", email="outsider@example.org")
        for user, role in (
            (cls.annotator, Role.ANNOTATOR),
            (cls.annotator2, Role.ANNOTATOR),
            (cls.reviewer, Role.REVIEWER),
            (cls.lead, Role.LEAD),
        ):
            MembershipFactory.create(project=cls.project, user=user, role=role)
