from __future__ import annotations

import os
from typing import Any

from django.core.management.base import BaseCommand, CommandError

from annotation.demo import DEMO_PASSWORD, DEMO_PEOPLE, DemoFailed, demo_load


class Command(BaseCommand):
    help = "Load the demo datasets (through the importers), demo people and projects. Safe to run twice."

    def handle(self, *args: Any, **options: Any) -> None:
        try:
            summaries = demo_load()
        except DemoFailed as failure:
            raise CommandError(f"demo import failed: {failure}") from None
        created = sum(summary["created"] for summary in summaries)
        unchanged = sum(summary["unchanged"] for summary in summaries)
        self.stdout.write(f"Demo data: {created} items created, {unchanged} already there.")
        host = os.environ.get("HOST", "127.0.0.1")
        port = os.environ.get("PORT", "8000")
        self.stdout.write(f"\nQuire: http://{host}:{port}/\nDemo logins (password: {DEMO_PASSWORD}):")
        for email, name, staff, role in DEMO_PEOPLE:
            what = "site admin" if staff else str(role)
            self.stdout.write(f"  {email:<26} {name:<16} {what}")
