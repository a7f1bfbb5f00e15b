from __future__ import annotations

import time
from argparse import ArgumentParser
from typing import Any

from django.core.management.base import BaseCommand, CommandError

from annotation.models import Project
from reviews.selectors.gold import QueueFilter, review_queue_counts
from reviews.services.review_states import review_states_rebuild


class Command(BaseCommand):
    help = (
        "Bring a project's review queue up to date: rebuild every item's review state from its submitted "
        "annotations, flags and gold record, for labels written in bulk without the review hooks. "
        "The same as the lead's button on the review page, run here instead of on a worker. "
        "Safe while annotators work and safe to run again."
    )

    def add_arguments(self, parser: ArgumentParser) -> None:
        parser.add_argument("--project", type=int, required=True, help="The project's id.")

    def handle(self, *args: Any, **options: Any) -> None:
        project = Project.objects.filter(pk=options["project"]).first()
        if project is None:
            raise CommandError(f"there is no project {options['project']}")
        started = time.perf_counter()
        written = review_states_rebuild(project=project)
        seconds = time.perf_counter() - started
        waiting = next(count for count in review_queue_counts(project) if count.key == QueueFilter.TO_REVIEW)
        self.stdout.write(
            f"{written} item{'s' if written != 1 else ''} brought up to date in {seconds:.1f} s; "
            f"{waiting.count}{'+' if waiting.capped else ''} to review."
        )
