"""Rubric rating: rubric checks and presets, project creation with a rubric, the form of each
preset (render, submit, round trip), pairwise order, stage reveals, cited images, levels of
measurement, blind annotation, outsiders, and query counts."""

from __future__ import annotations

import copy
import json
from typing import Any

from django.test import SimpleTestCase
from django.urls import reverse

from accounts.models import User
from annotation.errors import ApplicationError
from annotation.models import Annotation, AnnotationStatus, Figure, Project, ProjectItem
from annotation.services.projects import ProjectSettings, project_create
from annotation.services.queue import annotation_save_draft, annotation_submit, lease_claim
from annotation.workflows import get_workflow
from annotation.workflows.base import ConfigInvalid, LabelField
from annotation.workflows.rubric_forms import option_keys
from annotation.workflows.rubric_presets import PRESETS
from annotation.workflows.rubric_rating import answer_blocks, cited_tags, pair_seed, pair_swapped
from annotation.workflows.rubrics import Option, RubricInvalid, rubric_parse
from tests.annotation.rubric_support import CAPTION, custom_rubric, preset, rubric_project, scidqa_scores
from tests.base import CastTestCase
from tests.factories import CandidateAnswerFactory, DatasetFactory, QAItemFactory
from tests.web_support import count_queries

HTMX = {"HX-Request": "true"}
WORKFLOW = get_workflow("rubric_rating")


def checked_radio(name: str, value: str, index: int) -> str:
    """A chosen option of a scale without descriptions (laid out in a row), keyed by its value."""
    return (
        f'<input type="radio" name="{name}" value="{value}" data-rubric-criterion="{name}" required'
        f' class="rubric-scale rubric-scale--compact" id="id_{name}_{index}" data-rubric-key="{value}" checked>'
    )


def problems(config: Any) -> list[str]:
    try:
        rubric_parse(config)
    except RubricInvalid as invalid:
        return invalid.messages
    raise AssertionError("the rubric was accepted")


def with_criterion(**changes: Any) -> dict[str, Any]:
    """The custom rubric with its first criterion changed."""
    rubric = custom_rubric()
    rubric["criteria"][0].update(changes)
    return rubric


def with_scale(scale: dict[str, Any]) -> dict[str, Any]:
    return with_criterion(scale=scale)


class RubricCheckTests(SimpleTestCase):
    def test_every_preset_expands_parses_and_comes_back_the_same_from_its_stored_form(self) -> None:
        for name in PRESETS:
            with self.subTest(name):
                stored = WORKFLOW.check_config(preset(name))
                self.assertEqual(stored["preset"], name)
                self.assertEqual(WORKFLOW.check_config(stored), stored)
                self.assertEqual(rubric_parse(stored), rubric_parse(preset(name)))
                json.dumps(stored)  # the stored form is plain JSON

    def test_the_scidqa_preset_has_the_four_aspects_each_from_1_to_10_in_the_judges_words(self) -> None:
        rubric = rubric_parse(preset("scidqa_aspects"))
        self.assertEqual(rubric.unit, "candidate")
        self.assertEqual([c.key for c in rubric.criteria], ["relevance", "accuracy", "completeness", "conciseness"])
        for criterion in rubric.criteria:
            self.assertEqual(criterion.values(), tuple(range(1, 11)))
            self.assertEqual(criterion.level, "interval")
        self.assertEqual(
            rubric.criteria[0].description, "How well does the answer address the specific question asked?"
        )
        self.assertIn("(where 1 is poor and 10 is excellent)", rubric.instructions)

    def test_the_vinqa_presets_have_the_reference_scales_labels_and_levels(self) -> None:
        answer = rubric_parse(preset("vinqa_answer"))
        self.assertEqual(
            [(c.key, c.values(), c.level) for c in answer.criteria],
            [
                ("relevancy", (1, 2, 3, 4, 5), "ordinal"),
                ("completeness", (1, 2, 3, 4, 5), "ordinal"),
                ("faithfulness", (0, 1), "nominal"),
            ],
        )
        self.assertEqual(answer.criteria[0].description, "whether the answer correctly addresses the question")
        images = rubric_parse(preset("vinqa_cited_images"))
        self.assertEqual((images.unit, images.repeat), ("candidate", "cited_images"))
        self.assertEqual(
            [(c.key, c.values(), c.level) for c in images.criteria],
            [
                ("img_effectiveness", (1, 2, 3, 4, 5), "ordinal"),
                ("img_position", (0, 1), "nominal"),
                ("img_expression", (0, 1), "nominal"),
            ],
        )
        effectiveness = images.criteria[0].scale.options
        self.assertEqual(
            [o.label for o in effectiveness],
            ["Harmful", "Irrelevant", "Partially Effective", "Mostly Effective", "Highly Effective"],
        )
        self.assertTrue(effectiveness[0].description.startswith("The selected image in the answer are harmful"))
        self.assertEqual(
            [o.label for o in images.criteria[2].scale.options], ["Inappropriate Expression", "Appropriate Expression"]
        )

    def test_the_pairwise_and_spiqa_presets(self) -> None:
        pair = rubric_parse(preset("pairwise_preference"))
        self.assertEqual(pair.unit, "pair")
        self.assertEqual(pair.criteria[0].values(), ("A", "B", "tie", "neither"))
        check = rubric_parse(preset("spiqa_figure_check"))
        self.assertEqual(check.stage_count, 2)
        self.assertEqual([s.title for s in check.stages], ["Task-1: Image-only", "Task-2: Image+caption"])
        self.assertEqual(
            [(c.key, c.stage, c.required) for c in check.criteria][2:],
            [
                ("image_caption_helps", 2, True),
                ("guess_with_caption", 2, False),
            ],
        )
        self.assertEqual(dict(check.context)["caption"], 2)
        self.assertEqual(dict(check.context)["figure"], 1)
        self.assertNotIn("gold_answer", dict(check.context))
        author = rubric_parse(preset("spiqa_authorship"))
        self.assertEqual(author.criteria[0].values(), ("human", "machine", "unsure"))

    def test_an_empty_or_unknown_configuration_says_what_to_give(self) -> None:
        self.assertIn("Choose a preset", problems({})[0])
        self.assertEqual(problems([]), ["The rubric must be a JSON object."])
        self.assertIn("unknown preset 'scidqa'", problems({"preset": "scidqa"})[0])

    def test_bad_rubrics_get_one_clear_message_per_problem(self) -> None:
        cases: list[tuple[dict[str, Any], str]] = [
            (custom_rubric(critera=[]), "unknown key 'critera'; known keys: name, version"),
            (custom_rubric(name=" "), "name: is required"),
            (custom_rubric(unit="answers"), "unit: must be one of item, candidate, pair (got 'answers')"),
            (custom_rubric(criteria=[]), "criteria: give a list of at least one criterion"),
            (with_criterion(key="Helpful score"), "key must be 1 to 40 lower-case letters"),
            (with_criterion(key="pair"), "key 'pair' is reserved"),
            (with_criterion(key="note"), "criteria[1] ('note'): another criterion has the same key"),
            (with_criterion(stage=0), "stage must be a whole number from 1 to 4"),
            (with_criterion(level="interval"), "a points scale is measured as ordinal or nominal, not 'interval'"),
            (with_scale({"type": "stars"}), "scale must be an object whose type is one of points, range, choices"),
            (with_scale({"type": "range", "min": 10, "max": 1}), "a range's max (1) must be greater than its min (10)"),
            (with_scale({"type": "range", "min": 1, "max": 10, "step": 2}), "max - min (9) must be a whole number"),
            (with_scale({"type": "range", "min": 1, "max": 5, "step": 0}), "a range's step must be a number above 0"),
            (with_scale({"type": "range", "min": 1, "max": 5, "anchors": {"6": "top"}}), "anchor '6' is not a value"),
            (with_scale({"type": "points", "points": [{"value": 1, "label": "one"}]}), "needs a list of 2 to 10"),
            (
                with_scale({"type": "points", "points": [{"value": 2, "label": "b"}, {"value": 1, "label": "a"}]}),
                "list the points from the lowest value to the highest",
            ),
            (
                with_scale({"type": "points", "points": [{"value": 1, "label": "a"}, {"value": 1.0, "label": "b"}]}),
                "two points share a value",
            ),
            (
                with_scale({"type": "points", "points": [{"value": "1", "label": "a"}, {"value": 2, "label": "b"}]}),
                "a point's value must be a number",
            ),
            (
                with_scale({"type": "choices", "choices": [{"value": n, "label": n} for n in "abcdefghijk"]}),
                "needs a list of 2 to 10 choices (one number key each)",
            ),
            (
                with_scale(
                    {"type": "choices", "choices": [{"value": "a b", "label": "x"}, {"value": "c", "label": "y"}]}
                ),
                "a choice's value must be a short word",
            ),
            (with_scale({"type": "text", "max_length": 0}), "a text's max_length must be a whole number from 1"),
            (custom_rubric(context={"abstract": 1}), "unknown part 'abstract'"),
            (custom_rubric(context={"question": 1}), "the candidate unit rates answers, so the context must show"),
            (custom_rubric(unit="item", context={"answers": 1}), "'answers' needs the candidate or pair unit"),
            (custom_rubric(unit="item", repeat="cited_images", context={}), "rating each cited image needs the cand"),
            (custom_rubric(pair_systems=["a", "b"]), "pair_systems: only the pair unit compares systems"),
            (custom_rubric(unit="pair", pair_systems=["a", "a"]), "name at least two different systems"),
            (custom_rubric(stages=[{"title": "One"}, {"title": "Two"}]), "the criteria use 1 stage(s) but 2 are"),
        ]
        for config, expected in cases:
            with self.subTest(expected):
                found = problems(config)
                self.assertTrue(any(expected in message for message in found), found)

    def test_stages_must_follow_each_other_and_each_needs_a_required_question_to_reveal_the_next(self) -> None:
        gap = custom_rubric()
        gap["criteria"][1]["stage"] = 3
        self.assertIn("criteria: no criterion is in stage 2; stages are numbered 1, 2, … without gaps.", problems(gap))
        optional_first = custom_rubric()
        optional_first["criteria"][0]["required"] = False
        optional_first["criteria"][1]["stage"] = 2
        self.assertIn(
            "criteria: stage 1 needs a required criterion: answering it is what reveals stage 2.",
            problems(optional_first),
        )
        hidden_too_late = custom_rubric(context={"answers": 3})
        self.assertIn("context: 'answers' must name the stage it appears at, 1 to 1.", problems(hidden_too_late))

    def test_a_bad_rubric_lists_every_problem_not_only_the_first(self) -> None:
        config = custom_rubric(unit="pairs", name="")
        config["criteria"][1]["scale"] = {"type": "range", "min": 3, "max": 3}
        self.assertEqual(len(problems(config)), 3)

    def test_a_small_range_is_buttons_and_a_large_one_a_number_box(self) -> None:
        small = rubric_parse(with_scale({"type": "range", "min": 0, "max": 1, "step": 0.25})).criteria[0].scale
        self.assertEqual([o.value for o in small.options], [0, 0.25, 0.5, 0.75, 1])
        large = rubric_parse(with_scale({"type": "range", "min": 0, "max": 100})).criteria[0].scale
        self.assertEqual((large.options, large.as_buttons), ((), False))

    def test_number_keys_are_the_values_on_single_digit_scales_and_positions_otherwise(self) -> None:
        def keys(*values: Any) -> list[str]:
            return option_keys([Option(value=value, label="") for value in values])

        self.assertEqual(keys(0, 1), ["0", "1"])
        self.assertEqual(keys(1, 2, 3, 4, 5), ["1", "2", "3", "4", "5"])
        self.assertEqual(keys(*range(1, 11)), ["1", "2", "3", "4", "5", "6", "7", "8", "9", "0"])
        self.assertEqual(keys("A", "B", "tie", "neither"), ["1", "2", "3", "4"])
        self.assertEqual(keys(0, 0.5, 1), ["1", "2", "3"])

    def test_workflows_without_configuration_keep_it_as_given(self) -> None:
        self.assertEqual(get_workflow("qascore_rating").check_config({}), {})
        self.assertEqual(get_workflow("qascore_rating").unit_for({}), "candidate")

    def test_check_config_raises_config_invalid_with_the_messages(self) -> None:
        with self.assertRaises(ConfigInvalid) as raised:
            WORKFLOW.check_config(custom_rubric(unit="pairs"))
        self.assertEqual(raised.exception.messages, ["unit: must be one of item, candidate, pair (got 'pairs')."])


class CitedImagesUnitTests(SimpleTestCase):
    def test_cited_tags_are_distinct_lower_case_and_in_order_of_first_citation(self) -> None:
        text = "Sales rose [Chart_1] and [table_02]. Again [chart_1], then [figure_3] but not [image_1]."
        self.assertEqual(cited_tags(text), ["chart_1", "table_2", "figure_3"])

    def test_each_cited_image_goes_before_the_paragraph_that_cites_it_first(self) -> None:
        images: dict[str, Any] = {"chart_1": "chart", "table_1": "table"}
        blocks = answer_blocks("First [chart_1].\n\nSecond [table_1] and [chart_1].\n\nThird.", images)
        self.assertEqual(
            [(b.text, b.images) for b in blocks],
            [("First [chart_1].", ("chart",)), ("Second [table_1] and [chart_1].", ("table",)), ("Third.", ())],
        )

    def test_the_pair_order_is_a_fixed_coin_of_its_seed(self) -> None:
        seeds = [pair_seed(1, item) for item in range(40)]
        flips = [pair_swapped(seed) for seed in seeds]
        self.assertEqual(flips, [pair_swapped(seed) for seed in seeds])
        self.assertTrue(any(flips) and not all(flips))
        self.assertEqual(pair_seed(3, 45), "rubric_rating pair order: project 3, item 45")


class RubricTestCase(CastTestCase):
    def claim(self, project: Project, user: User | None = None) -> Annotation:
        record = lease_claim(project=project, annotator=user or self.annotator)
        assert record is not None
        return record

    def url(self, name: str, project: Project, record: Annotation | None = None) -> str:
        if record is None:
            return reverse(name, args=[project.pk])
        return reverse(name, args=[project.pk, record.project_item_id])

    def submit(self, project: Project, record: Annotation, payload: dict[str, Any], user: User | None = None) -> Any:
        outcome = annotation_submit(
            project=project, project_item_id=record.project_item_id, annotator=user or self.annotator, payload=payload
        )
        outcome.annotation.refresh_from_db()
        return outcome.annotation.payload


class ProjectCreationTests(RubricTestCase):
    def test_the_stored_rubric_is_the_full_preset_and_the_queue_follows_its_unit(self) -> None:
        per_answer = rubric_project(lead=self.lead, config=preset("scidqa_aspects"), items=2, systems=("a", "b"))
        self.assertEqual(per_answer.workflow_config["name"], "SciDQA: four aspects (1-10)")
        self.assertEqual(len(per_answer.workflow_config["criteria"]), 4)
        entries = ProjectItem.objects.filter(project=per_answer)
        self.assertEqual(entries.count(), 4)
        self.assertFalse(entries.filter(candidate__isnull=True).exists())
        per_item = rubric_project(lead=self.lead, config=preset("spiqa_authorship"), items=2, systems=("a", "b"))
        self.assertEqual(ProjectItem.objects.filter(project=per_item, candidate__isnull=True).count(), 2)
        pairs = rubric_project(lead=self.lead, config=preset("pairwise_preference"), items=2, systems=("a", "b"))
        self.assertEqual(ProjectItem.objects.filter(project=pairs, candidate__isnull=True).count(), 2)

    def test_a_pair_project_takes_only_items_with_two_answers(self) -> None:
        dataset = DatasetFactory.create()
        single = QAItemFactory.create(dataset=dataset, paper=None)
        CandidateAnswerFactory.create(item=single)
        double = QAItemFactory.create(dataset=dataset, paper=None)
        CandidateAnswerFactory.create(item=double)
        CandidateAnswerFactory.create(item=double)
        project = project_create(
            name="Pairs",
            dataset=dataset,
            workflow="rubric_rating",
            created_by=self.lead,
            settings=ProjectSettings(workflow_config=preset("pairwise_preference")),
        )
        self.assertEqual(
            list(ProjectItem.objects.filter(project=project).values_list("item_id", flat=True)), [double.pk]
        )
        lonely = DatasetFactory.create()
        CandidateAnswerFactory.create(item=QAItemFactory.create(dataset=lonely, paper=None))
        with self.assertRaisesMessage(ApplicationError, "None of the selected items has two candidate answers"):
            project_create(
                name="No pairs",
                dataset=lonely,
                workflow="rubric_rating",
                created_by=self.lead,
                settings=ProjectSettings(workflow_config=preset("pairwise_preference")),
            )

    def test_a_bad_rubric_is_refused_with_its_messages_and_nothing_is_created(self) -> None:
        before = Project.objects.count()
        with self.assertRaises(ApplicationError) as raised:
            rubric_project(lead=self.lead, config=custom_rubric(unit="pairs"))
        self.assertEqual(
            raised.exception.errors, {"workflow_config": ["unit: must be one of item, candidate, pair (got 'pairs')."]}
        )
        self.assertIn("The workflow configuration is not valid", raised.exception.message)
        self.assertEqual(Project.objects.count(), before)


class ProjectFormTests(RubricTestCase):
    def form_data(self, **overrides: Any) -> dict[str, Any]:
        dataset = DatasetFactory.create(created_by=self.lead)
        for _ in range(2):
            CandidateAnswerFactory.create(item=QAItemFactory.create(dataset=dataset, paper=None), system_name="m")
        data = {
            "name": "Rated",
            "dataset": dataset.pk,
            "workflow": "rubric_rating",
            "overlap": "2",
            "lease_minutes": "30",
            "calibration_size": "0",
            "rubric_preset": "",
            "workflow_config": "",
        }
        data.update(overrides)
        return data

    def test_the_form_offers_the_presets_and_shows_each_as_json(self) -> None:
        self.client.force_login(self.lead)
        response = self.client.get(reverse("project_create"))
        self.assertContains(response, '<option value="scidqa_aspects">')
        self.assertContains(response, '<option value="spiqa_figure_check">')
        self.assertContains(response, "Rubric (rubric rating only)")
        self.assertContains(response, "&quot;img_effectiveness&quot;")

    def test_a_lead_creates_a_project_from_a_preset(self) -> None:
        self.client.force_login(self.lead)
        response = self.client.post(reverse("project_create"), self.form_data(rubric_preset="scidqa_aspects"))
        project = Project.objects.get(name="Rated")
        self.assertRedirects(response, reverse("project_detail", args=[project.pk]))
        self.assertEqual(project.workflow_config, WORKFLOW.check_config(preset("scidqa_aspects")))
        self.assertEqual(ProjectItem.objects.filter(project=project).count(), 2)

    def test_a_lead_creates_a_project_from_their_own_rubric(self) -> None:
        self.client.force_login(self.lead)
        data = self.form_data(workflow_config=json.dumps(custom_rubric()))
        self.client.post(reverse("project_create"), data)
        project = Project.objects.get(name="Rated")
        self.assertEqual(project.workflow_config["criteria"][0]["level"], "ordinal")
        self.assertEqual(
            project.workflow_config["context"],
            {"paper": 1, "question": 1, "gold_answer": 1, "answers": 1, "figure": 1, "caption": 1},
        )

    def test_broken_json_says_where_and_nothing_is_created(self) -> None:
        self.client.force_login(self.lead)
        response = self.client.post(reverse("project_create"), self.form_data(workflow_config='{"name": "x",\n}'))
        self.assertEqual(response.status_code, 200)
        self.assertContains(response, "Not valid JSON: Expecting property name enclosed in double quotes (line 2")
        self.assertContains(response, "{&quot;name&quot;: &quot;x&quot;,")
        self.assertFalse(Project.objects.filter(name="Rated").exists())

    def test_a_bad_rubric_shows_every_message_on_the_rubric_box(self) -> None:
        self.client.force_login(self.lead)
        config = custom_rubric(unit="pairs")
        config["criteria"][0]["scale"] = {"type": "range", "min": 5, "max": 1}
        response = self.client.post(reverse("project_create"), self.form_data(workflow_config=json.dumps(config)))
        self.assertContains(response, "unit: must be one of item, candidate, pair (got &#x27;pairs&#x27;).")
        self.assertContains(response, "a range&#x27;s max (1) must be greater than its min (5).")
        self.assertEqual(response.context["form"].errors["workflow_config"][0][:5], "unit:")
        self.assertFalse(Project.objects.filter(name="Rated").exists())

    def test_the_rubric_must_be_one_of_a_preset_or_your_own_and_only_for_rubric_rating(self) -> None:
        self.client.force_login(self.lead)
        cases = [
            ({}, "rubric_preset", "Rubric rating needs a rubric"),
            (
                {"rubric_preset": "scidqa_aspects", "workflow_config": json.dumps(custom_rubric())},
                "workflow_config",
                "Choose a preset or give your own rubric, not both.",
            ),
            ({"workflow": "qascore_rating", "rubric_preset": "scidqa_aspects"}, "rubric_preset", "Only rubric rating"),
            ({"workflow_config": "[1, 2]"}, "workflow_config", "Give one JSON object"),
        ]
        for overrides, field, message in cases:
            with self.subTest(message):
                response = self.client.post(reverse("project_create"), self.form_data(**overrides))
                self.assertIn(message, " ".join(response.context["form"].errors[field]))
        self.assertFalse(Project.objects.filter(name="Rated").exists())


class LevelTests(RubricTestCase):
    def test_each_criterion_is_one_label_field_with_the_level_of_its_scale(self) -> None:
        expected: dict[str, list[tuple[str, str, tuple[Any, ...]]]] = {
            "scidqa_aspects": [
                ("relevance", "interval", ()),
                ("accuracy", "interval", ()),
                ("completeness", "interval", ()),
                ("conciseness", "interval", ()),
            ],
            "vinqa_answer": [
                ("relevancy", "ordinal", (1, 2, 3, 4, 5)),
                ("completeness", "ordinal", (1, 2, 3, 4, 5)),
                ("faithfulness", "nominal", (0, 1)),
            ],
            "pairwise_preference": [("preference", "nominal", ("A", "B", "tie", "neither"))],
            "spiqa_figure_check": [
                ("image_helps", "nominal", ("yes", "no")),
                ("guess_image_only", "text", ()),
                ("image_caption_helps", "nominal", ("yes", "no")),
                ("guess_with_caption", "text", ()),
            ],
            "spiqa_authorship": [("question_author", "nominal", ("human", "machine", "unsure"))],
        }
        for name, fields in expected.items():
            with self.subTest(name):
                project = rubric_project(lead=self.lead, config=preset(name), items=1, systems=("a", "b"))
                found = [(f.name, f.level, f.values) for f in WORKFLOW.fields_for(project)]
                self.assertEqual(found, fields)

    def test_a_range_may_be_declared_ordinal(self) -> None:
        config = with_scale({"type": "range", "min": 1, "max": 3})
        config["criteria"][0]["level"] = "ordinal"
        project = rubric_project(lead=self.lead, config=config, items=1)
        self.assertEqual(
            WORKFLOW.fields_for(project)[0], LabelField("helpful", "Is the answer helpful?", "ordinal", (1, 2, 3))
        )

    def test_per_image_criteria_are_agreed_on_as_each_answers_mean_over_its_cited_images(self) -> None:
        project = rubric_project(lead=self.lead, config=preset("vinqa_cited_images"), items=1)
        fields = WORKFLOW.fields_for(project)
        self.assertEqual(
            [(f.name, f.level) for f in fields],
            [
                ("img_effectiveness", "interval"),
                ("img_position", "interval"),
                ("img_expression", "interval"),
                ("no_cited_images", "nominal"),
            ],
        )
        payload = {
            "cited_images": [
                {"tag": "chart_1", "img_effectiveness": 5, "img_position": 1, "img_expression": 0},
                {"tag": "table_1", "img_effectiveness": 2, "img_position": 1, "img_expression": 1},
            ],
            "no_cited_images": False,
        }
        self.assertEqual([f.value(payload) for f in fields], [3.5, 1.0, 0.5, False])
        self.assertIsNone(fields[0].value({"cited_images": [], "no_cited_images": True}))

    def test_gold_fields_keep_the_pair_and_the_cited_images(self) -> None:
        project = rubric_project(lead=self.lead, config=preset("pairwise_preference"), items=1, systems=("a", "b"))
        pair = {
            "A": {"candidate": 1, "system": "a"},
            "B": {"candidate": 2, "system": "b"},
            "seed": "s",
            "swapped": False,
        }
        gold = WORKFLOW.gold_fields({"preference": "B", "pair": pair, "rubric": {}}, project)
        self.assertEqual(gold, {"preference": "B", "pair": pair})
        self.assertEqual(
            WORKFLOW.curated({"question": "Q", "answer": "A", "evidence": []}, gold),
            {"question": "Q", "answer": "A", "evidence": []},
        )


class ScidqaAspectsTests(RubricTestCase):
    project: Project

    @classmethod
    def setUpTestData(cls) -> None:
        super().setUpTestData()
        cls.project = rubric_project(
            lead=cls.lead,
            config=preset("scidqa_aspects"),
            items=2,
            members=(cls.annotator, cls.annotator2),
            overlap=2,
        )

    def test_the_page_shows_question_gold_answer_and_answer_with_ten_keyed_points_per_aspect(self) -> None:
        record = self.claim(self.project)
        self.client.force_login(self.annotator)
        response = self.client.get(self.url("workbench_item", self.project, record))
        item = record.project_item.item
        self.assertContains(response, item.question)
        self.assertContains(response, "Guided sampling.")
        self.assertContains(response, "The sampler with guidance reaches the lowest FID. (model-a)")
        self.assertNotContains(response, ">model-a<")  # the system stays hidden
        self.assertContains(response, 'data-rubric-criterion="relevance"', count=10)
        self.assertContains(response, 'data-rubric-key="0"', count=4)
        self.assertContains(response, "How well does the answer address the specific question asked?")
        self.assertContains(response, '<span class="rubric-option-label">excellent</span>', count=4)
        self.assertContains(response, "Choose an option of the highlighted criterion")
        self.assertContains(response, "workflow-rubric_rating.js")
        self.assertNotContains(response, "style=")

    def test_a_plain_form_submit_stores_numbers_and_a_revision(self) -> None:
        record = self.claim(self.project)
        self.client.force_login(self.annotator)
        data = {"relevance": "7", "accuracy": "8", "completeness": "6", "conciseness": "10", "client_token": "t-1"}
        response = self.client.post(self.url("workbench_submit", self.project, record), data)
        self.assertRedirects(response, self.url("workbench_next", self.project), fetch_redirect_response=False)
        record.refresh_from_db()
        self.assertEqual(record.status, AnnotationStatus.SUBMITTED)
        self.assertEqual(
            record.payload,
            {**scidqa_scores(), "rubric": {"name": "SciDQA: four aspects (1-10)", "version": 1}},
        )
        self.assertEqual(record.revisions.get().client_token, "t-1")

    def test_scores_outside_the_range_or_missing_are_refused_with_messages(self) -> None:
        record = self.claim(self.project)
        self.client.force_login(self.annotator)
        data = {"relevance": "11", "accuracy": "8", "completeness": "6"}
        response = self.client.post(self.url("workbench_submit", self.project, record), data, headers=HTMX)
        self.assertContains(response, "Choose one of 1, 2, 3, 4, 5, 6, 7, 8, 9, 10.")
        self.assertContains(response, "Rate this criterion.")
        record.refresh_from_db()
        self.assertEqual(record.status, AnnotationStatus.DRAFT)

    def test_json_numbers_and_texts_of_numbers_are_the_same_answer_and_editing_keeps_revisions(self) -> None:
        record = self.claim(self.project)
        first = self.submit(self.project, record, {**scidqa_scores(), "accuracy": 8.0})
        self.assertEqual(first["accuracy"], 8)
        self.assertIsInstance(first["accuracy"], int)
        # The stored payload shows as the form again and submits to itself.
        self.assertEqual(self.submit(self.project, record, first), first)
        record.refresh_from_db()
        self.assertEqual(record.revision_count, 2)
        self.client.force_login(self.annotator)
        response = self.client.get(self.url("workbench_item", self.project, record))
        self.assertContains(response, checked_radio("accuracy", "8", 7), html=True)
        self.assertContains(response, "Save my edit")

    def test_my_history_shows_my_scores(self) -> None:
        record = self.claim(self.project)
        self.submit(self.project, record, scidqa_scores(relevance=3))
        self.client.force_login(self.annotator)
        response = self.client.get(self.url("workbench_history", self.project))
        self.assertContains(response, "Relevance")
        self.assertContains(response, "<dd>3</dd>", html=True)

    def test_an_annotator_sees_only_their_own_ratings(self) -> None:
        mine = self.claim(self.project)
        self.submit(self.project, mine, scidqa_scores(relevance=2, accuracy=3, completeness=4, conciseness=5))
        theirs = lease_claim(project=self.project, annotator=self.annotator2)
        assert theirs is not None
        self.assertEqual(theirs.project_item_id, mine.project_item_id)
        self.client.force_login(self.annotator2)
        response = self.client.get(self.url("workbench_item", self.project, theirs))
        self.assertNotContains(response, "checked")
        self.assertEqual(self.client.get(self.url("workbench_item", self.project, mine)).status_code, 200)
        history = self.client.get(self.url("workbench_history", self.project))
        self.assertNotContains(history, "<dd>2</dd>", html=True)

    def test_the_outsider_gets_404_on_every_url_and_changes_nothing(self) -> None:
        record = self.claim(self.project)
        self.client.force_login(self.outsider)
        urls = [
            ("get", self.url("workbench_next", self.project)),
            ("get", self.url("workbench_history", self.project)),
            ("get", self.url("workbench_item", self.project, record)),
            ("post", self.url("workbench_draft", self.project, record)),
            ("post", self.url("workbench_submit", self.project, record)),
            ("post", self.url("workbench_skip", self.project, record)),
        ]
        for method, url in urls:
            with self.subTest(url):
                response = getattr(self.client, method)(url, scidqa_scores() if method == "post" else None)
                self.assertEqual(response.status_code, 404)
        record.refresh_from_db()
        self.assertEqual((record.status, record.revision_count), (AnnotationStatus.DRAFT, 0))

    def test_a_draft_keeps_the_rubrics_fields_and_drops_others(self) -> None:
        record = self.claim(self.project)
        self.client.force_login(self.annotator)
        self.client.post(self.url("workbench_draft", self.project, record), {"relevance": "4", "score": "1"})
        record.refresh_from_db()
        self.assertEqual(record.payload, {"relevance": "4"})
        response = self.client.get(self.url("workbench_item", self.project, record))
        self.assertContains(response, checked_radio("relevance", "4", 3), html=True)


class OtherPresetTests(RubricTestCase):
    def test_every_preset_renders_and_a_complete_answer_round_trips(self) -> None:
        answers: dict[str, dict[str, Any]] = {
            "scidqa_aspects": scidqa_scores(),
            "vinqa_answer": {"relevancy": 4, "completeness": 5, "faithfulness": 0},
            "vinqa_cited_images": {"img_effectiveness__1": 5, "img_position__1": 1, "img_expression__1": 0},
            "pairwise_preference": {"preference": "tie"},
            "spiqa_figure_check": {
                "image_helps": "no",
                "guess_image_only": "Only axes are visible.",
                "image_caption_helps": "yes",
                "guess_with_caption": "",
            },
            "spiqa_authorship": {"question_author": "unsure"},
        }
        for name, answer in answers.items():
            with self.subTest(name):
                project = rubric_project(
                    lead=self.lead,
                    config=preset(name),
                    items=1,
                    systems=("a", "b"),
                    answers=("The chart [chart_1] shows it.",),
                    members=(self.annotator,),
                )
                record = self.claim(project)
                self.client.force_login(self.annotator)
                page = self.client.get(self.url("workbench_item", project, record))
                self.assertEqual(page.status_code, 200)
                for criterion in project.workflow_config["criteria"]:
                    if criterion.get("stage", 1) == 1:
                        self.assertContains(page, criterion["label"].replace("'", "&#x27;"))
                stored = self.submit(project, record, answer)
                self.assertEqual(self.submit(project, record, copy.deepcopy(stored)), stored)
                self.assertEqual(stored["rubric"]["name"], project.workflow_config["name"])
                again = self.client.get(self.url("workbench_item", project, record))
                self.assertContains(again, "checked")

    def test_the_vinqa_answer_rubric_shows_the_figures_and_their_descriptions(self) -> None:
        project = rubric_project(lead=self.lead, config=preset("vinqa_answer"), items=1, members=(self.annotator,))
        record = self.claim(project)
        self.client.force_login(self.annotator)
        response = self.client.get(self.url("workbench_item", project, record))
        self.assertContains(response, CAPTION)
        self.assertContains(response, "whether the answer correctly addresses the question")
        self.assertContains(response, 'id="id_faithfulness_0" data-rubric-key="0"')
        self.assertContains(response, 'id="id_faithfulness_1" data-rubric-key="1"')
        self.assertNotContains(response, "Guided sampling.")  # VinQA rates against the context, not a gold answer

    def test_the_authorship_question_shows_the_question_and_nothing_that_gives_it_away(self) -> None:
        project = rubric_project(lead=self.lead, config=preset("spiqa_authorship"), items=1, members=(self.annotator,))
        record = self.claim(project)
        self.client.force_login(self.annotator)
        response = self.client.get(self.url("workbench_item", project, record))
        self.assertContains(response, record.project_item.item.question)
        self.assertNotContains(response, CAPTION)
        self.assertNotContains(response, "Guided sampling.")
        self.assertEqual(
            self.submit(project, record, {"question_author": "machine"}),
            {
                "question_author": "machine",
                "rubric": {"name": "SPIQA: written by a human, a model, or unsure", "version": 1},
            },
        )


class CustomRubricTests(RubricTestCase):
    def project_with_scale(self, scale: dict[str, Any]) -> Project:
        return rubric_project(lead=self.lead, config=with_scale(scale), items=1, members=(self.annotator,))

    def test_a_wide_range_is_a_number_box_that_checks_bounds_and_steps(self) -> None:
        project = self.project_with_scale({"type": "range", "min": 0, "max": 100, "step": 5})
        record = self.claim(project)
        self.client.force_login(self.annotator)
        response = self.client.get(self.url("workbench_item", project, record))
        self.assertContains(
            response,
            '<input type="number" name="helpful" data-rubric-criterion="helpful" min="0" max="100" step="5" required'
            ' id="id_helpful">',
            html=True,
        )
        for value, message in (("105", "less than or equal to 100"), ("52", "Use steps of 5 from 0: 0, 5, …")):
            with self.subTest(value), self.assertRaises(ApplicationError) as raised:
                self.submit(project, record, {"helpful": value})
            self.assertIn(message, raised.exception.errors["helpful"][0])
        self.assertEqual(
            self.submit(project, record, {"helpful": "55", "note": " ok "}),
            {
                "helpful": 55,
                "note": "ok",
                "rubric": {"name": "Helpfulness", "version": 1},
            },
        )

    def test_a_range_with_fractional_steps_keeps_its_values(self) -> None:
        project = self.project_with_scale({"type": "range", "min": 0, "max": 1, "step": 0.5})
        record = self.claim(project)
        stored = self.submit(project, record, {"helpful": "0.5"})
        self.assertEqual(stored["helpful"], 0.5)
        self.assertEqual(self.submit(project, record, {"helpful": 1.0})["helpful"], 1)
        with self.assertRaises(ApplicationError) as raised:
            self.submit(project, record, {"helpful": "0.25"})
        self.assertEqual(raised.exception.errors, {"helpful": ["Choose one of 0, 0.5, 1."]})

    def test_an_optional_criterion_may_stay_empty_and_a_text_is_limited(self) -> None:
        project = rubric_project(lead=self.lead, config=custom_rubric(), items=1, members=(self.annotator,))
        record = self.claim(project)
        self.assertEqual(self.submit(project, record, {"helpful": 2})["note"], "")
        with self.assertRaises(ApplicationError) as raised:
            self.submit(project, record, {"helpful": 2, "note": "x" * 501})
        self.assertIn("at most 500 characters", raised.exception.errors["note"][0])


class PairwiseTests(RubricTestCase):
    project: Project

    @classmethod
    def setUpTestData(cls) -> None:
        super().setUpTestData()
        cls.project = rubric_project(
            lead=cls.lead,
            config=preset("pairwise_preference"),
            items=6,
            systems=("alpha", "beta", "gamma"),
            answers=("Alpha answers.", "Beta answers.", "Gamma answers."),
            members=(cls.annotator, cls.annotator2),
            overlap=2,
        )

    def shown(self, record: Annotation, user: User | None = None) -> tuple[int, int]:
        """Where Answer A and Answer B appear in the page, by their text."""
        self.client.force_login(user or self.annotator)
        content = self.client.get(self.url("workbench_item", self.project, record)).content.decode()
        section_a = content.index('id="answer-A"')
        section_b = content.index('id="answer-B"')
        return section_a, section_b

    def test_the_order_shown_is_recorded_and_follows_the_seed_of_project_and_item(self) -> None:
        record = self.claim(self.project)
        stored = self.submit(self.project, record, {"preference": "A"})
        item_id = record.project_item.item_id
        seed = pair_seed(self.project.pk, item_id)
        self.assertEqual(stored["pair"]["seed"], seed)
        self.assertEqual(stored["pair"]["swapped"], pair_swapped(seed))
        systems = ["beta", "alpha"] if pair_swapped(seed) else ["alpha", "beta"]
        self.assertEqual([stored["pair"]["A"]["system"], stored["pair"]["B"]["system"]], systems)
        self.client.force_login(self.annotator)
        content = self.client.get(self.url("workbench_item", self.project, record)).content.decode()
        first, second = (f"{system.capitalize()} answers." for system in systems)
        self.assertLess(content.index(first), content.index(second))
        self.assertLess(content.index('id="answer-A"'), content.index(first))
        self.assertNotIn("gamma", content.lower())

    def test_a_reload_and_another_annotator_see_the_same_order_and_the_record_ignores_a_posted_one(self) -> None:
        mine = self.claim(self.project)
        theirs = self.claim(self.project, self.annotator2)
        self.assertEqual(mine.project_item_id, theirs.project_item_id)
        self.client.force_login(self.annotator)
        pages = [self.client.get(self.url("workbench_item", self.project, mine)).content.decode() for _ in range(2)]
        self.client.force_login(self.annotator2)
        pages.append(self.client.get(self.url("workbench_item", self.project, theirs)).content.decode())
        orders = [(page.index("Alpha answers."), page.index("Beta answers.")) for page in pages]
        self.assertEqual(len({first < second for first, second in orders}), 1)
        forged = {"preference": "B", "pair": {"A": {"candidate": 0, "system": "gamma"}}}
        mine_stored = self.submit(self.project, mine, forged)
        theirs_stored = self.submit(self.project, theirs, {"preference": "A"}, user=self.annotator2)
        self.assertEqual(mine_stored["pair"], theirs_stored["pair"])
        self.assertNotEqual(mine_stored["pair"]["A"]["system"], "gamma")

    def test_both_orders_occur_across_items(self) -> None:
        flips = {
            pair_swapped(pair_seed(self.project.pk, item_id))
            for item_id in ProjectItem.objects.filter(project=self.project).values_list("item_id", flat=True)
        }
        stored = []
        for _ in range(6):
            record = self.claim(self.project)
            stored.append(self.submit(self.project, record, {"preference": "neither"})["pair"]["swapped"])
        self.assertEqual(set(stored), flips)

    def test_the_configured_systems_are_compared_first(self) -> None:
        config = WORKFLOW.check_config(preset("pairwise_preference"))
        config["pair_systems"] = ["gamma", "alpha"]
        project = rubric_project(
            lead=self.lead,
            config=config,
            items=1,
            systems=("alpha", "beta", "gamma"),
            members=(self.annotator,),
        )
        record = self.claim(project)
        stored = self.submit(project, record, {"preference": "B"})
        self.assertEqual({stored["pair"]["A"]["system"], stored["pair"]["B"]["system"]}, {"gamma", "alpha"})

    def test_the_api_claim_gives_the_pair_in_the_order_shown_without_system_names(self) -> None:
        self.client.force_login(self.annotator)
        response = self.client.post(reverse("api_claim", args=[self.project.pk]))
        self.assertEqual(response.status_code, 200)
        item = response.json()["item"]
        seed = pair_seed(self.project.pk, item["id"])
        systems = ["beta", "alpha"] if pair_swapped(seed) else ["alpha", "beta"]
        expected = [
            {"letter": letter, "text": f"{system.capitalize()} answers."}
            for letter, system in zip("AB", systems, strict=True)
        ]
        self.assertEqual(item["shown"], {"pair": expected})
        self.assertIsNone(item["candidate"])

    def test_the_api_claim_has_no_pair_context_for_other_units(self) -> None:
        project = rubric_project(lead=self.lead, config=preset("scidqa_aspects"), items=1, members=(self.annotator,))
        self.client.force_login(self.annotator)
        response = self.client.post(reverse("api_claim", args=[project.pk]))
        self.assertEqual(response.status_code, 200)
        self.assertEqual(response.json()["item"]["shown"], {})

    def test_a_choice_outside_the_four_is_refused(self) -> None:
        record = self.claim(self.project)
        with self.assertRaises(ApplicationError) as raised:
            self.submit(self.project, record, {"preference": "C"})
        self.assertEqual(raised.exception.errors, {"preference": ["Choose one of A, B, tie, neither."]})


class StageTests(RubricTestCase):
    project: Project

    @classmethod
    def setUpTestData(cls) -> None:
        super().setUpTestData()
        cls.project = rubric_project(
            lead=cls.lead,
            config=preset("spiqa_figure_check"),
            items=2,
            members=(cls.annotator, cls.annotator2),
            overlap=2,
        )

    def page(self, record: Annotation, **kwargs: Any) -> Any:
        self.client.force_login(self.annotator)
        return self.client.get(self.url("workbench_item", self.project, record), **kwargs)

    def draft(self, record: Annotation, payload: dict[str, Any]) -> None:
        annotation_save_draft(
            project=self.project, project_item_id=record.project_item_id, annotator=self.annotator, payload=payload
        )

    def test_stage_one_shows_the_image_but_neither_the_caption_nor_the_stage_two_questions(self) -> None:
        record = self.claim(self.project)
        response = self.page(record)
        self.assertNotContains(response, CAPTION)
        self.assertNotContains(response, "image_caption_helps")
        self.assertContains(response, "The caption is shown at stage 2, once you have answered stage 1.")
        self.assertContains(response, 'data-shortcut="rubric-reveal"')
        self.assertContains(response, "Task-1: Image-only")
        self.assertNotContains(response, "Guided sampling.")  # the crowd pilot never showed the answer

    def test_submitting_stage_one_alone_asks_for_the_reveal(self) -> None:
        record = self.claim(self.project)
        self.client.force_login(self.annotator)
        response = self.client.post(
            self.url("workbench_submit", self.project, record),
            {"image_helps": "yes", "guess_image_only": "FID"},
            headers=HTMX,
        )
        self.assertContains(response, "Stage 1 is answered: reveal stage 2 (Task-2: Image+caption) with r")
        self.assertNotContains(response, CAPTION)
        record.refresh_from_db()
        self.assertEqual(record.status, AnnotationStatus.DRAFT)

    def test_an_unanswered_stage_one_is_not_revealed(self) -> None:
        record = self.claim(self.project)
        self.draft(record, {"image_helps": "yes"})
        self.assertNotContains(self.page(record), CAPTION)

    def test_the_reveal_button_saves_stage_one_and_shows_the_caption_and_stage_two_without_javascript(self) -> None:
        record = self.claim(self.project)
        self.client.force_login(self.annotator)
        response = self.client.post(
            self.url("workbench_draft", self.project, record),
            {"image_helps": "no", "guess_image_only": "  Axes only.  "},
            follow=True,
        )
        self.assertContains(response, CAPTION)
        self.assertContains(response, 'name="image_caption_helps"')
        self.assertContains(response, "rubric-stage--done")
        self.assertNotContains(response, 'data-shortcut="rubric-reveal"')
        hidden = response.context["form"]["reveals"].value()
        self.assertEqual(json.loads(hidden), {"2": {"image_helps": "no", "guess_image_only": "Axes only."}})

    def test_the_record_keeps_the_answers_from_before_the_reveal_and_lists_what_changed(self) -> None:
        record = self.claim(self.project)
        self.draft(record, {"image_helps": "no", "guess_image_only": "Axes only."})
        reveals = self.page(record).context["form"]["reveals"].value()
        self.client.force_login(self.annotator)
        data = {
            "image_helps": "yes",
            "guess_image_only": "Axes only.",
            "image_caption_helps": "yes",
            "guess_with_caption": "FID",
            "reveals": reveals,
        }
        self.client.post(self.url("workbench_submit", self.project, record), data)
        record.refresh_from_db()
        self.assertEqual(record.status, AnnotationStatus.SUBMITTED)
        self.assertEqual(
            record.payload,
            {
                "image_helps": "yes",
                "guess_image_only": "Axes only.",
                "image_caption_helps": "yes",
                "guess_with_caption": "FID",
                "reveals": {"2": {"image_helps": "no", "guess_image_only": "Axes only."}},
                "changed_after_reveal": ["image_helps"],
                "rubric": {"name": "SPIQA: two-stage figure check", "version": 1},
            },
        )
        edit = self.page(record)
        self.assertContains(edit, "You changed “Does the image have information to help answer the question?”")
        self.assertContains(edit, "the answer you gave before (no) stays in the record too.")
        self.assertEqual(self.submit(self.project, record, record.payload), record.payload)

    def test_a_damaged_record_of_the_reveal_is_refused(self) -> None:
        record = self.claim(self.project)
        answers = {"image_helps": "yes", "guess_image_only": "x", "image_caption_helps": "no"}
        for reveals in ('{"2": {"image_helps": "maybe", "guess_image_only": "x"}}', '{"2": {}}', "not json"):
            with self.subTest(reveals), self.assertRaises(ApplicationError) as raised:
                self.submit(self.project, record, {**answers, "reveals": reveals})
            self.assertIn("The record of your answers from before the reveal is damaged", str(raised.exception.errors))

    def test_a_script_that_never_saw_a_reveal_records_the_answers_as_given(self) -> None:
        record = self.claim(self.project)
        stored = self.submit(
            self.project, record, {"image_helps": "yes", "guess_image_only": "x", "image_caption_helps": "no"}
        )
        self.assertEqual(stored["reveals"], {"2": {"image_helps": "yes", "guess_image_only": "x"}})
        self.assertEqual((stored["changed_after_reveal"], stored["guess_with_caption"]), ([], ""))

    def test_another_annotators_reveal_reveals_nothing_to_me(self) -> None:
        mine = self.claim(self.project)
        theirs = self.claim(self.project, self.annotator2)
        annotation_save_draft(
            project=self.project,
            project_item_id=theirs.project_item_id,
            annotator=self.annotator2,
            payload={"image_helps": "no", "guess_image_only": "their secret guess"},
        )
        self.assertEqual(mine.project_item_id, theirs.project_item_id)
        response = self.page(mine)
        self.assertNotContains(response, CAPTION)
        self.assertNotContains(response, "their secret guess")


class CitedImageTests(RubricTestCase):
    def project_with(self, answer: str) -> Project:
        project = rubric_project(
            lead=self.lead, config=preset("vinqa_cited_images"), items=1, answers=(answer,), members=(self.annotator,)
        )
        figure = Figure.objects.get(paper__items__project_items__project=project)
        figure.extra = {"context_above": "Sales grew fast.", "context_bottom": "See the appendix."}
        figure.save(update_fields=["extra"])
        return project

    def test_each_cited_image_is_rated_and_shown_before_its_paragraph_with_its_description(self) -> None:
        project = self.project_with("AI grew.\n\nAs [chart_1] shows, sales rose.\n\nAlso [table_4].")
        record = self.claim(project)
        self.client.force_login(self.annotator)
        response = self.client.get(self.url("workbench_item", project, record))
        content = response.content.decode()
        self.assertLess(content.index('id="cited-chart_1"'), content.index("As [chart_1] shows, sales rose."))
        self.assertLess(content.index("AI grew."), content.index('id="cited-chart_1"'))
        self.assertContains(response, "Sales grew fast.")
        self.assertContains(response, "chart_1 · Effectiveness")
        self.assertContains(response, 'name="img_effectiveness__2"')
        self.assertContains(response, "Cited but not among this item&#x27;s figures and tables: table_4.")
        stored = self.submit(
            project,
            record,
            {
                "img_effectiveness__1": 5,
                "img_position__1": 1,
                "img_expression__1": 1,
                "img_effectiveness__2": 1,
                "img_position__2": 0,
                "img_expression__2": 0,
            },
        )
        self.assertEqual(
            stored["cited_images"],
            [
                {"tag": "chart_1", "img_effectiveness": 5, "img_position": 1, "img_expression": 1},
                {"tag": "table_4", "img_effectiveness": 1, "img_position": 0, "img_expression": 0},
            ],
        )
        self.assertFalse(stored["no_cited_images"])

    def test_an_answer_citing_no_image_has_nothing_to_rate_and_says_so(self) -> None:
        project = self.project_with("Sales rose, without any figure.")
        record = self.claim(project)
        self.client.force_login(self.annotator)
        response = self.client.get(self.url("workbench_item", project, record))
        self.assertContains(response, "This answer cites no image, so there is nothing to rate")
        self.assertNotContains(response, "data-rubric-criterion")
        stored = self.submit(project, record, {})
        self.assertEqual((stored["cited_images"], stored["no_cited_images"]), ([], True))


class QueryCountTests(RubricTestCase):
    def test_the_item_page_runs_a_fixed_number_of_queries_whatever_the_size_of_the_project(self) -> None:
        for name, queries in ITEM_QUERIES.items():
            small = rubric_project(
                lead=self.lead, config=preset(name), items=1, systems=("a", "b"), members=(self.annotator,)
            )
            large = rubric_project(
                lead=self.lead,
                config=preset(name),
                items=6,
                systems=("a", "b", "c"),
                members=(self.annotator, self.annotator2),
            )
            for _ in range(2):
                theirs = self.claim(large, self.annotator2)
                annotation_save_draft(
                    project=large, project_item_id=theirs.project_item_id, annotator=self.annotator2, payload={}
                )
            records = [self.claim(small), self.claim(large)]
            self.client.force_login(self.annotator)
            with self.subTest(name):
                counts = [
                    count_queries(lambda r=record: self.client.get(self.url("workbench_item", r.project, r)))
                    for record in records
                ]
                self.assertEqual(counts, [queries, queries])

    def test_a_submit_runs_a_fixed_number_of_queries_whatever_the_size_of_the_project(self) -> None:
        data = {"relevance": "7", "accuracy": "8", "completeness": "6", "conciseness": "10"}
        self.client.force_login(self.annotator)
        for items in (1, 8):
            project = rubric_project(
                lead=self.lead, config=preset("scidqa_aspects"), items=items, members=(self.annotator,)
            )
            record = self.claim(project)
            with self.subTest(items=items), self.assertNumQueries(SUBMIT_QUERIES):
                self.client.post(self.url("workbench_submit", project, record), data)
            record.refresh_from_db()
            self.assertEqual(record.status, AnnotationStatus.SUBMITTED)


# The item page: session, user, membership; my record with its item, paper, candidate and
# guideline; the project (for its rubric); then the item's evidence figures when the rubric
# shows figures or rates cited images, or the item's candidates for a pair; my counts; the
# project's counts; my previous record; the current guideline.
ITEM_QUERIES = {
    "scidqa_aspects": 9,
    "vinqa_cited_images": 10,
    "pairwise_preference": 10,
    "spiqa_figure_check": 10,
}
# A plain-form submit: session, user, membership, my record; savepoint, the item locked, my
# record locked, the project (for its rubric), the guideline, the item's count, my record
# saved; the review state (project, the item's position, its annotations, its gold record,
# the state written); the revision; release.
SUBMIT_QUERIES = 18
