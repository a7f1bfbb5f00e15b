from __future__ import annotations

import json
import sys
from argparse import ArgumentParser
from decimal import Decimal
from typing import Any

from django.core.management.base import BaseCommand, CommandError

from annotation.errors import ApplicationError
from evaluation.services.endpoints import EndpointSettings, KeyChange, endpoint_create, endpoint_probe


class Command(BaseCommand):
    help = (
        "Add a model endpoint (any OpenAI-compatible server). The API key comes from an environment variable "
        "named with --api-key-env, or is read from standard input with --api-key-stdin and stored encrypted; "
        "it is never printed. --test probes the endpoint and prints the report as JSON."
    )

    def add_arguments(self, parser: ArgumentParser) -> None:
        parser.add_argument("--name", required=True)
        parser.add_argument("--base-url", required=True, help="Up to and including /v1.")
        parser.add_argument("--model", required=True)
        key = parser.add_mutually_exclusive_group()
        key.add_argument("--api-key-env", default="", help="Read the key from this environment variable.")
        key.add_argument("--api-key-stdin", action="store_true", help="Read the key from standard input and store it.")
        parser.add_argument("--images", action="store_true", help="The endpoint accepts images.")
        parser.add_argument("--logprobs", action="store_true", help="The endpoint returns top_logprobs.")
        parser.add_argument("--max-concurrent", type=int, default=4)
        parser.add_argument("--requests-per-minute", type=int, default=None)
        parser.add_argument("--tokens-per-minute", type=int, default=None)
        parser.add_argument("--timeout", type=float, default=60.0, help="Seconds per request.")
        parser.add_argument("--price-input", type=Decimal, default=Decimal(0), help="Per million prompt tokens.")
        parser.add_argument("--price-output", type=Decimal, default=Decimal(0), help="Per million completion tokens.")
        parser.add_argument("--test", action="store_true", help="Test the connection once added.")

    def handle(self, *args: Any, **options: Any) -> None:
        settings = EndpointSettings(
            name=options["name"],
            base_url=options["base_url"],
            model=options["model"],
            supports_images=options["images"],
            supports_logprobs=options["logprobs"],
            max_concurrent=options["max_concurrent"],
            requests_per_minute=options["requests_per_minute"],
            tokens_per_minute=options["tokens_per_minute"],
            timeout_seconds=options["timeout"],
            price_input_per_million=Decimal(options["price_input"]),
            price_output_per_million=Decimal(options["price_output"]),
        )
        api_key = sys.stdin.readline().strip() if options["api_key_stdin"] else None
        try:
            endpoint = endpoint_create(
                settings=settings, key=KeyChange(api_key_env=options["api_key_env"], api_key=api_key), created_by=None
            )
            self.stderr.write(f"added endpoint {endpoint.name} ({endpoint.key_source})")
            if options["test"]:
                report = endpoint_probe(endpoint=endpoint)
                self.stdout.write(json.dumps({"endpoint": endpoint.name, **report}))
                if not report["ok"]:
                    raise CommandError(f"endpoint {endpoint.name} was added but a connection check failed")
        except ApplicationError as error:
            raise CommandError(_describe(error)) from None


def _describe(error: ApplicationError) -> str:
    details = "; ".join(f"{field}: {' '.join(messages)}" for field, messages in error.errors.items())
    return f"{error.message} {details}".strip()
