from __future__ import annotations

import json
from argparse import ArgumentParser
from typing import Any

from django.core.management.base import BaseCommand, CommandError

from accounts.models import User
from annotation.errors import ApplicationError
from annotation.models import Project
from annotation.services.m3sciqa import locality_questions_publish_counted


class Command(BaseCommand):
    help = (
        "Publish an m3sciqa_locality project's submitted questions into a dataset for validation (created if "
        "new). All or nothing, and safe to run again: new questions are added, edited ones updated. The last "
        "line of output is a JSON summary."
    )

    def add_arguments(self, parser: ArgumentParser) -> None:
        parser.add_argument("--project", required=True, type=int, help="The m3sciqa_locality project's id.")
        parser.add_argument("--dataset", required=True, help="Dataset name (created if new).")
        parser.add_argument(
            "--actor",
            default=None,
            help="Email of the lead publishing (default: whoever created the project); recorded on the dataset.",
        )

    def handle(self, *args: Any, **options: Any) -> None:
        project = Project.objects.select_related("dataset", "created_by").filter(pk=options["project"]).first()
        if project is None:
            raise CommandError(f"no project with id {options['project']}")
        actor = _actor(project, options["actor"])
        try:
            outcome = locality_questions_publish_counted(project=project, dataset_name=options["dataset"], actor=actor)
        except ApplicationError as error:
            for messages in error.errors.values():
                for message in messages:
                    self.stderr.write(f"error: {message}")
            raise CommandError(error.message) from None
        summary = {
            "dataset": outcome.dataset.name,
            "dataset_id": outcome.dataset.pk,
            "created": outcome.created,
            "updated": outcome.updated,
            "unchanged": outcome.unchanged,
        }
        self.stdout.write(json.dumps(summary, ensure_ascii=False))


def _actor(project: Project, email: str | None) -> User:
    if email:
        user = User.objects.filter(email__iexact=email.strip()).first()
        if user is None:
            raise CommandError(f"no user with the email {email!r}")
        return user
    if project.created_by is None:
        raise CommandError("the project has no creator any more; name the lead with --actor EMAIL")
    return project.created_by
