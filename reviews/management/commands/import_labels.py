from __future__ import annotations

from argparse import ArgumentParser
from pathlib import Path
from typing import Any

from django.core.management.base import BaseCommand, CommandError

from annotation.errors import ApplicationError
from annotation.models import Project
from reviews.services.labels_import import labels_import


class Command(BaseCommand):
    help = (
        "Store labels made outside Quire as submitted annotations of named raters (accounts that cannot log in). "
        "CSV columns: item (external id), rater (name), one column per label field of the project's workflow, "
        "and optionally split and candidate (system name) where an external id names several queue entries. "
        "Set fields are ';'-separated labels. All or nothing; importing the same file again changes nothing."
    )

    def add_arguments(self, parser: ArgumentParser) -> None:
        parser.add_argument("--project", type=int, required=True, help="The project's id.")
        parser.add_argument("file", type=Path, help="The CSV file of labels.")

    def handle(self, *args: Any, **options: Any) -> None:
        project = Project.objects.filter(pk=options["project"]).first()
        if project is None:
            raise CommandError(f"there is no project {options['project']}")
        try:
            result = labels_import(project=project, path=Path(options["file"]))
        except ApplicationError as error:
            raise CommandError("\n".join([error.message, *error.errors.get("file", [])])) from None
        self.stdout.write(
            f"{result.rows} row{'s' if result.rows != 1 else ''}: {result.created} annotation(s) created, "
            f"{result.updated} updated, {result.unchanged} unchanged; {result.raters_created} new rater(s)."
        )
