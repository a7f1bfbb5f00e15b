"""The evaluation pages: site admins only; endpoints with "test connection" and a key that is
never shown; prompts; creating runs; the run page with its live progress region, pause,
resume and cancel, and its paginated results."""

from __future__ import annotations

from decimal import Decimal
from typing import Any

from django.test import override_settings
from django.urls import reverse

from annotation.models import CandidateAnswer, QAItem
from evaluation.models import (
    InferenceRun,
    JudgeConfig,
    JudgeResult,
    JudgeRun,
    LearnedFallback,
    ModelEndpoint,
    PromptTemplate,
    RunStatus,
)
from evaluation.services.prompts import SPIQA_DIRECT_QA
from evaluation.services.runs import judge_run_create
from tests.base import CastTestCase
from tests.evaluation.engine_support import (
    API_KEY,
    SYSTEM,
    answers,
    corpus,
    endpoint_for,
    gold_snapshot,
    labelled_qascore_project,
    process,
)
from tests.factories import ProjectFactory
from tests.openai_server import OpenAIServer
from tests.web_support import count_queries

HTMX = {"HX-Request": "true"}


# The cast's passwords are hashed for every test class; a fast hasher keeps that cheap.
@override_settings(PASSWORD_HASHERS=["django.contrib.auth.hashers.MD5PasswordHasher"])
class EvaluationPagesTestCase(CastTestCase):
    def setUp(self) -> None:
        self.server = OpenAIServer().start()
        self.addCleanup(self.server.stop)
        self.server.script(contains="Candidate answer:", reply="Yes", top_logprobs=[("Yes", -0.1), ("No", -2.5)])
        self.endpoint = endpoint_for(self.server)
        self.client.force_login(self.admin)

    def judge_run(self, *, items: int = 4, **arguments: Any) -> JudgeRun:
        dataset = corpus(items=items)
        answers(dataset)
        values = {
            "judge": "l3score",
            "endpoint": self.endpoint,
            "answers_system": SYSTEM,
            "dataset": dataset,
            **arguments,
        }
        return judge_run_create(**values)

    def detail_url(self, run: JudgeRun) -> str:
        return reverse("run_detail", args=["judge", run.pk])


class AccessTests(EvaluationPagesTestCase):
    def urls(self) -> list[tuple[str, str]]:
        run = self.judge_run()
        detail = self.detail_url(run)
        return [
            ("get", reverse("evaluation_home")),
            ("get", reverse("endpoint_list")),
            ("get", reverse("endpoint_create")),
            ("get", reverse("endpoint_edit", args=[self.endpoint.pk])),
            ("post", reverse("endpoint_test", args=[self.endpoint.pk])),
            ("get", reverse("prompt_list")),
            ("get", reverse("inference_run_create")),
            ("get", reverse("judge_run_create")),
            ("post", reverse("learned_fallback_train")),
            ("get", detail),
            ("post", reverse("run_pause", args=["judge", run.pk])),
            ("post", reverse("run_resume", args=["judge", run.pk])),
            ("post", reverse("run_cancel", args=["judge", run.pk])),
        ]

    def test_people_who_are_not_site_admins_get_404_everywhere(self) -> None:
        urls = self.urls()
        for user in (self.lead, self.reviewer, self.annotator, self.outsider):
            self.client.force_login(user)
            for method, url in urls:
                with self.subTest(user=user.username, url=url):
                    self.assertEqual(getattr(self.client, method)(url).status_code, 404)
        self.assertEqual(JudgeRun.objects.get().status, RunStatus.QUEUED)

    def test_anonymous_visitors_are_sent_to_log_in(self) -> None:
        self.client.logout()
        for method, url in self.urls():
            with self.subTest(url=url):
                response = getattr(self.client, method)(url)
                self.assertEqual(response.status_code, 302)
                self.assertIn(reverse("account_login"), response["Location"])

    def test_state_changing_urls_refuse_get_and_pages_refuse_delete(self) -> None:
        run = self.judge_run()
        for name in ("run_pause", "run_resume", "run_cancel"):
            self.assertEqual(self.client.get(reverse(name, args=["judge", run.pk])).status_code, 405)
        self.assertEqual(self.client.get(reverse("endpoint_test", args=[self.endpoint.pk])).status_code, 405)
        self.assertEqual(self.client.delete(reverse("evaluation_home")).status_code, 405)

    def test_an_unknown_run_kind_or_number_is_404(self) -> None:
        self.assertEqual(self.client.get(reverse("run_detail", args=["other", 1])).status_code, 404)
        self.assertEqual(self.client.get(reverse("run_detail", args=["judge", 999_999])).status_code, 404)

    def test_the_site_navigation_links_the_evaluation_pages_for_admins_only(self) -> None:
        self.assertContains(self.client.get(reverse("home")), f'href="{reverse("evaluation_home")}"')
        self.client.force_login(self.lead)
        self.assertNotContains(self.client.get(reverse("home")), f'href="{reverse("evaluation_home")}"')


class EndpointPageTests(EvaluationPagesTestCase):
    def form(self, **overrides: Any) -> dict[str, Any]:
        return {
            "name": "openai",
            "base_url": self.server.base_url,
            "model": "gpt-4o",
            "api_key": "sk-very-secret-value",
            "api_key_env": "",
            "supports_logprobs": "on",
            "max_concurrent": "8",
            "requests_per_minute": "",
            "tokens_per_minute": "",
            "timeout_seconds": "30",
            "price_input_per_million": "2.5",
            "price_output_per_million": "10",
            **overrides,
        }

    def test_an_admin_adds_an_endpoint_whose_key_is_stored_encrypted_and_never_shown_again(self) -> None:
        response = self.client.post(reverse("endpoint_create"), self.form())

        self.assertRedirects(response, reverse("endpoint_list"))
        endpoint = ModelEndpoint.objects.get(name="openai")
        self.assertNotIn("sk-very-secret-value", endpoint.api_key_encrypted)
        self.assertTrue(endpoint.api_key_encrypted)
        self.assertEqual((endpoint.max_concurrent, endpoint.price_input_per_million), (8, Decimal("2.5")))
        for url in (reverse("endpoint_list"), reverse("endpoint_edit", args=[endpoint.pk])):
            page = self.client.get(url)
            self.assertNotContains(page, "sk-very-secret-value")
            self.assertNotContains(page, endpoint.api_key_encrypted)
        self.assertContains(self.client.get(reverse("endpoint_list")), "stored (encrypted)")

    def test_editing_without_a_key_keeps_the_stored_one_and_a_new_key_replaces_it(self) -> None:
        self.client.post(reverse("endpoint_create"), self.form())
        endpoint = ModelEndpoint.objects.get(name="openai")
        stored = endpoint.api_key_encrypted

        self.client.post(reverse("endpoint_edit", args=[endpoint.pk]), self.form(api_key="", model="gpt-4o-mini"))
        endpoint.refresh_from_db()
        self.assertEqual((endpoint.model, endpoint.api_key_encrypted), ("gpt-4o-mini", stored))

        self.client.post(reverse("endpoint_edit", args=[endpoint.pk]), self.form(api_key="", clear_key="on"))
        endpoint.refresh_from_db()
        self.assertEqual(endpoint.key_source, "none")

    def test_a_key_and_a_variable_together_are_refused_on_the_form(self) -> None:
        response = self.client.post(reverse("endpoint_create"), self.form(api_key_env="OPENAI_API_KEY"))

        self.assertEqual(response.status_code, 200)
        self.assertContains(response, "not both")
        self.assertFalse(ModelEndpoint.objects.filter(name="openai").exists())

    def test_a_second_endpoint_with_the_same_name_is_refused(self) -> None:
        response = self.client.post(reverse("endpoint_create"), self.form(name=self.endpoint.name))

        self.assertContains(response, "An endpoint with this name exists.")

    def test_test_connection_checks_what_the_endpoint_claims_and_keeps_the_report(self) -> None:
        self.server.drop_logprobs = True

        response = self.client.post(reverse("endpoint_test", args=[self.endpoint.pk]), follow=True)

        self.endpoint.refresh_from_db()
        assert self.endpoint.last_probe is not None
        self.assertFalse(self.endpoint.last_probe["ok"])
        checks = {check["name"]: check["ok"] for check in self.endpoint.last_probe["checks"]}
        self.assertEqual(checks, {"answers": True, "images": True, "logprobs": False})
        self.assertContains(response, "a check failed")
        self.assertContains(response, "returned no top_logprobs")
        self.assertEqual(self.server.authorizations[0], f"Bearer {API_KEY}")

    def test_the_endpoint_list_takes_one_query(self) -> None:
        endpoint_for(self.server, name="second")
        self.client.get(reverse("endpoint_list"))

        self.assertEqual(count_queries(lambda: self.client.get(reverse("endpoint_list"))), 3)


class PromptPageTests(EvaluationPagesTestCase):
    def test_the_spiqa_preset_is_there_and_saving_under_its_name_makes_version_2(self) -> None:
        page = self.client.get(reverse("prompt_list"))
        self.assertContains(page, SPIQA_DIRECT_QA.name)
        self.assertContains(page, "{&#x27;Answer&#x27;: &#x27;Direct Answer to the Question&#x27;}")

        response = self.client.post(
            reverse("prompt_list"),
            {"name": SPIQA_DIRECT_QA.name, "text": "Q: {question}", "system_message": "", "note": "short"},
        )

        self.assertRedirects(response, reverse("prompt_list"))
        self.assertEqual(
            list(PromptTemplate.objects.filter(name=SPIQA_DIRECT_QA.name).values_list("version", flat=True)), [2, 1]
        )

    def test_the_prompt_list_takes_a_fixed_number_of_queries(self) -> None:
        self.client.get(reverse("prompt_list"))
        before = count_queries(lambda: self.client.get(reverse("prompt_list")))
        for number in range(3):
            self.client.post(reverse("prompt_list"), {"name": f"extra-{number}", "text": "{question}", "note": ""})

        self.assertEqual(count_queries(lambda: self.client.get(reverse("prompt_list"))), before)

    def test_a_misspelt_placeholder_is_refused(self) -> None:
        response = self.client.post(reverse("prompt_list"), {"name": "x", "text": "{question} {pasage}", "note": ""})

        self.assertContains(response, "Unknown placeholder {pasage}")


class RunCreatePageTests(EvaluationPagesTestCase):
    def test_an_admin_queues_a_judge_run_and_lands_on_its_page(self) -> None:
        dataset = corpus(items=3)
        answers(dataset)
        form = {
            "judge": "l3score",
            "endpoint": self.endpoint.pk,
            "answers_system": SYSTEM,
            "dataset": dataset.pk,
            "split": "test",
            "config": '{"profile": "one-token"}',
            "chunk_size": "2",
            "use_cache": "on",
        }

        with self.captureOnCommitCallbacks() as callbacks:
            response = self.client.post(reverse("judge_run_create"), form)

        run = JudgeRun.objects.get()
        self.assertRedirects(response, self.detail_url(run))
        self.assertEqual(
            (run.items_total, run.parameters["config"], run.chunks.count()), (3, {"profile": "one-token"}, 2)
        )
        self.assertEqual(len(callbacks), 1)

    def test_l3score_on_an_endpoint_without_logprobs_is_refused_with_the_reason(self) -> None:
        dataset = corpus(items=2)
        answers(dataset)
        self.endpoint.supports_logprobs = False
        self.endpoint.save(update_fields=["supports_logprobs"])
        form = {
            "judge": "l3score",
            "endpoint": self.endpoint.pk,
            "answers_system": SYSTEM,
            "dataset": dataset.pk,
            "config": "{}",
            "chunk_size": "200",
        }

        response = self.client.post(reverse("judge_run_create"), form)

        self.assertContains(response, "is not marked as returning top_logprobs")
        self.assertFalse(JudgeRun.objects.exists())

    def test_an_admin_queues_an_inference_run_with_the_spiqa_preset(self) -> None:
        dataset = corpus(items=2)
        self.client.get(reverse("inference_run_create"))
        prompt = PromptTemplate.objects.get(name=SPIQA_DIRECT_QA.name)
        form = {
            "endpoint": self.endpoint.pk,
            "prompt": prompt.pk,
            "system_name": "gpt-x",
            "input_mode": "text",
            "dataset": dataset.pk,
            "split": "",
            "temperature": "0",
            "max_tokens": "256",
            "figure_scope": "paper",
            "max_figures": "8",
            "shuffle_seed": "0",
            "image_longest_side": "1024",
            "chunk_size": "200",
            "use_cache": "on",
        }

        response = self.client.post(reverse("inference_run_create"), form)

        run = InferenceRun.objects.get()
        self.assertRedirects(response, reverse("run_detail", args=["inference", run.pk]))
        self.assertEqual((run.system_name, run.items_total, run.parameters["max_tokens"]), ("gpt-x", 2, 256))

    def test_training_the_learned_fallback_shows_its_cross_validated_accuracy_on_the_judge_page(self) -> None:
        project = labelled_qascore_project(lead=self.lead)

        response = self.client.post(reverse("learned_fallback_train"), {"project": project.pk}, follow=True)

        fallback = LearnedFallback.objects.get()
        self.assertRedirects(response, reverse("judge_run_create"))
        self.assertContains(response, f"Trained fallback {fallback.pk} on 24 labels: cross-validated accuracy")
        self.assertContains(response, f'<td class="number">{fallback.pk}</td>')
        self.client.force_login(self.lead)
        self.assertEqual(self.client.post(reverse("learned_fallback_train"), {"project": project.pk}).status_code, 404)

    def test_an_offline_metric_is_queued_without_an_endpoint_and_refuses_one(self) -> None:
        dataset = corpus(items=3)
        answers(dataset)
        form = {
            "judge": "rouge_l",
            "answers_system": SYSTEM,
            "dataset": dataset.pk,
            "config": "{}",
            "chunk_size": "200",
        }

        refused = self.client.post(reverse("judge_run_create"), {**form, "endpoint": self.endpoint.pk})
        self.assertContains(refused, "rouge_l is computed from the answers alone and calls no model")
        self.assertFalse(JudgeRun.objects.exists())
        response = self.client.post(reverse("judge_run_create"), form)

        run = JudgeRun.objects.get()
        self.assertRedirects(response, self.detail_url(run))
        self.assertEqual((run.judge, run.endpoint, run.items_total), ("rouge_l", None, 3))
        process(run)
        page = self.client.get(self.detail_url(run))
        self.assertContains(page, "none: scored offline from the answers")
        self.assertContains(self.client.get(reverse("evaluation_home")), '<span class="muted">offline</span>')

    def test_a_model_judge_without_an_endpoint_is_refused_on_the_endpoint_field(self) -> None:
        dataset = corpus(items=2)
        answers(dataset)
        form = {"judge": "m3sciqa", "answers_system": SYSTEM, "dataset": dataset.pk, "config": "{}", "chunk_size": "9"}

        response = self.client.post(reverse("judge_run_create"), form)

        self.assertFormError(
            response.context["form"], "endpoint", "The m3sciqa judge asks a model: choose an endpoint."
        )

    def test_a_judge_run_over_a_gold_snapshot_with_a_named_configuration(self) -> None:
        dataset = corpus(items=3)
        answers(dataset)
        project = ProjectFactory.create(dataset=dataset)
        items = list(QAItem.objects.filter(dataset=dataset).order_by("position"))
        snapshot = gold_snapshot(project, items, version=2, dropped={1})
        config = JudgeConfig.objects.create(
            name="exact", judge="exact_match", kind="threshold", threshold=1.0, project=project
        )
        form = {
            "judge": "exact_match",
            "answers_system": SYSTEM,
            "snapshot": snapshot.pk,
            "judge_config": config.pk,
            "config": "{}",
            "chunk_size": "200",
        }

        response = self.client.post(reverse("judge_run_create"), form)

        run = JudgeRun.objects.get()
        self.assertRedirects(response, self.detail_url(run))
        self.assertEqual((run.snapshot, run.config, run.items_total, run.project), (snapshot, config, 2, project))
        page = self.client.get(self.detail_url(run))
        self.assertContains(page, "gold snapshot v2</a>")
        self.assertContains(page, "exact (score threshold 1.0)")

    def test_a_configuration_of_another_judge_is_refused_on_its_field(self) -> None:
        dataset = corpus(items=2)
        answers(dataset)
        config = JudgeConfig.objects.create(
            name="l3", judge="l3score", kind="threshold", threshold=0.5, project=self.project
        )
        form = {
            "judge": "exact_match",
            "answers_system": SYSTEM,
            "dataset": dataset.pk,
            "judge_config": config.pk,
            "config": "{}",
            "chunk_size": "200",
        }

        response = self.client.post(reverse("judge_run_create"), form)

        self.assertFormError(
            response.context["form"], "judge_config", "Configuration 'l3' is for the l3score judge, not exact_match."
        )

    def test_a_form_naming_both_a_project_and_a_dataset_is_refused(self) -> None:
        form = {
            "judge": "l3score",
            "endpoint": self.endpoint.pk,
            "answers_system": SYSTEM,
            "project": self.project.pk,
            "dataset": self.dataset.pk,
            "config": "{}",
            "chunk_size": "200",
        }

        self.assertContains(
            self.client.post(reverse("judge_run_create"), form), "Choose a project, a dataset or a gold snapshot"
        )


class RunPageTests(EvaluationPagesTestCase):
    def test_the_page_shows_progress_totals_and_the_results_with_escaped_answers(self) -> None:
        run = self.judge_run()
        CandidateAnswer.objects.filter(system_name=SYSTEM).update(text="<script>alert(1)</script>")
        process(run)

        page = self.client.get(self.detail_url(run))

        self.assertContains(page, 'id="run-progress"')
        self.assertContains(page, "4 of 4 (100% finished)")
        self.assertContains(page, "&lt;script&gt;alert(1)&lt;/script&gt;")
        self.assertNotContains(page, "<script>alert(1)")
        self.assertNotContains(page, 'hx-trigger="every 2s"')
        self.assertNotContains(page, "style=")

    def test_while_active_the_progress_region_polls_itself_every_two_seconds(self) -> None:
        run = self.judge_run()

        region = self.client.get(self.detail_url(run), headers={**HTMX, "HX-Target": "run-progress"})

        self.assertContains(region, 'hx-trigger="every 2s"')
        self.assertContains(region, "waiting for a worker")
        self.assertNotContains(region, "<html")
        self.assertNotContains(region, 'id="run-results"')

    def test_results_are_paginated_and_htmx_swaps_the_results_region_only(self) -> None:
        run = self.judge_run(items=60)
        process(run)

        region = self.client.get(self.detail_url(run) + "?page=2", headers={**HTMX, "HX-Target": "run-results"})

        self.assertContains(region, 'id="run-results"')
        self.assertNotContains(region, 'id="run-progress"')
        self.assertContains(region, "Page 2 of 2")
        self.assertEqual(region.content.decode().count("<tr>"), 1 + 10)

    def test_the_status_filter_shows_only_matching_results(self) -> None:
        run = self.judge_run()
        process(run)
        JudgeResult.objects.filter(run=run, position=0).update(status=JudgeResult.Status.ERROR, error="broken reply")

        page = self.client.get(self.detail_url(run) + "?status=error")

        self.assertContains(page, "broken reply")
        self.assertEqual(page.context["page"].paginator.count, 1)

    def test_pause_resume_and_cancel_from_the_page(self) -> None:
        run = self.judge_run()
        pause = reverse("run_pause", args=["judge", run.pk])

        self.assertRedirects(self.client.post(pause), self.detail_url(run))
        run.refresh_from_db()
        self.assertEqual(run.status, RunStatus.PAUSED)

        with self.captureOnCommitCallbacks() as callbacks:
            region = self.client.post(reverse("run_resume", args=["judge", run.pk]), headers=HTMX)
        self.assertContains(region, 'id="run-progress"')
        self.assertNotContains(region, "<html")
        self.assertEqual(len(callbacks), 1)
        run.refresh_from_db()
        self.assertEqual(run.status, RunStatus.QUEUED)

        self.client.post(reverse("run_cancel", args=["judge", run.pk]))
        run.refresh_from_db()
        self.assertEqual(run.status, RunStatus.CANCELLED)

    def test_a_repeated_cancel_changes_nothing_and_says_why(self) -> None:
        run = self.judge_run()
        self.client.post(reverse("run_cancel", args=["judge", run.pk]))
        run.refresh_from_db()
        finished_at = run.finished_at

        region = self.client.post(reverse("run_cancel", args=["judge", run.pk]), headers=HTMX)

        self.assertContains(region, "This run is already cancelled.")
        run.refresh_from_db()
        self.assertEqual((run.status, run.finished_at), (RunStatus.CANCELLED, finished_at))

    def test_the_run_page_and_the_runs_list_take_a_fixed_number_of_queries(self) -> None:
        small = self.judge_run(items=3)
        process(small)
        big = self.judge_run(items=40)
        process(big)

        self.client.get(self.detail_url(big))
        queries = count_queries(lambda: self.client.get(self.detail_url(big)))
        self.assertEqual(queries, count_queries(lambda: self.client.get(self.detail_url(small))))
        with self.assertNumQueries(4):
            self.client.get(reverse("evaluation_home"))
        self.assertEqual(queries, 5)
