from __future__ import annotations

import factory

from accounts.models import User
from annotation.models import CandidateAnswer, Dataset, Figure, Paper, Project, ProjectMembership, QAItem, Role


class UserFactory(factory.django.DjangoModelFactory[User]):
    class Meta:
        model = User
        django_get_or_create = ("username",)

    username = factory.Sequence(lambda n: f"user{n}")
    email = factory.LazyAttribute(lambda user: f"{user.username}@example.org")
    password = factory.django.Password("correct horse battery staple")


class DatasetFactory(factory.django.DjangoModelFactory[Dataset]):
    class Meta:
        model = Dataset

    name = factory.Sequence(lambda n: f"dataset-{n}")
    source_format = "spiqa"


class PaperFactory(factory.django.DjangoModelFactory[Paper]):
    class Meta:
        model = Paper

    dataset = factory.SubFactory(DatasetFactory)
    external_id = factory.Sequence(lambda n: f"2101.{n:05d}v1")
    title = factory.Sequence(lambda n: f"Paper {n}")
    position = factory.Sequence(lambda n: n)


class FigureFactory(factory.django.DjangoModelFactory[Figure]):
    class Meta:
        model = Figure

    paper = factory.SubFactory(PaperFactory)
    file_name = factory.Sequence(lambda n: f"Figure{n}-1.png")
    caption = "A caption."
    position = factory.Sequence(lambda n: n)


class QAItemFactory(factory.django.DjangoModelFactory[QAItem]):
    class Meta:
        model = QAItem

    paper = factory.SubFactory(PaperFactory)
    dataset = factory.SelfAttribute("paper.dataset")
    split = "test-A"
    external_id = factory.Sequence(lambda n: f"item-{n}")
    question = factory.Sequence(lambda n: f"Question {n}?")
    answer = "An answer."
    answer_normalized = "An answer."
    position = factory.Sequence(lambda n: n)


class CandidateAnswerFactory(factory.django.DjangoModelFactory[CandidateAnswer]):
    class Meta:
        model = CandidateAnswer

    item = factory.SubFactory(QAItemFactory)
    system_name = factory.Sequence(lambda n: f"system-{n}")
    text = "A candidate answer."


class ProjectFactory(factory.django.DjangoModelFactory[Project]):
    class Meta:
        model = Project

    name = factory.Sequence(lambda n: f"Project {n}")
    dataset = factory.SubFactory(DatasetFactory)
    workflow = "spiqa_filter"


class MembershipFactory(factory.django.DjangoModelFactory[ProjectMembership]):
    class Meta:
        model = ProjectMembership

    project = factory.SubFactory(ProjectFactory)
    user = factory.SubFactory(UserFactory)
    role = Role.ANNOTATOR
