"""The project pages: creating a project, its overview, guidelines, members and assignments."""

from __future__ import annotations

from typing import Any

from django.core import mail
from django.urls import reverse

from accounts.models import User
from annotation.models import Assignment, AssignmentMode, Guideline, Project, ProjectItem, ProjectMembership, Role
from tests.annotation.workbench_support import spiqa_project
from tests.base import CastTestCase
from tests.factories import DatasetFactory, MembershipFactory, QAItemFactory, UserFactory

HTMX = {"HX-Request": "true"}


class ProjectPagesTestCase(CastTestCase):
    """The cast, plus ``work``: a SPIQA project of two papers with three questions each,
    led by ``lead``, with both annotators and the reviewer as members."""

    work: Project

    @classmethod
    def setUpTestData(cls) -> None:
        super().setUpTestData()
        cls.work = spiqa_project(lead=cls.lead, members=(cls.annotator, cls.annotator2))
        MembershipFactory.create(project=cls.work, user=cls.reviewer, role=Role.REVIEWER)

    def url(self, name: str, project: Project | None = None) -> str:
        return reverse(name, args=[(project or self.work).pk])


class ProjectCreateTests(ProjectPagesTestCase):
    def form_data(self, **overrides: Any) -> dict[str, Any]:
        data = {
            "name": "Second pass",
            "dataset": self.work.dataset_id,
            "workflow": "spiqa_filter",
            "overlap": "2",
            "lease_minutes": "15",
            "assignment_mode": "",
            "calibration_size": "1",
            "split": "",
            "paper_ids": "",
            "sample_size": "",
            "seed": "",
            "guidelines": "",
        }
        data.update(overrides)
        return data

    def test_a_lead_sees_the_form_with_only_the_datasets_they_may_build_on(self) -> None:
        foreign = DatasetFactory.create(name="Someone else's data")
        self.client.force_login(self.lead)
        response = self.client.get(reverse("project_create"))
        self.assertContains(response, "Create project")
        self.assertContains(response, self.work.dataset.name)
        self.assertNotContains(response, foreign.name)

    def test_a_lead_creates_a_project_and_becomes_its_lead(self) -> None:
        self.client.force_login(self.lead)
        response = self.client.post(reverse("project_create"), self.form_data())
        project = Project.objects.get(name="Second pass")
        self.assertRedirects(response, self.url("project_detail", project))
        self.assertEqual((project.overlap, project.lease_seconds, project.calibration_size), (2, 900, 1))
        self.assertEqual(project.assignment_mode, AssignmentMode.OPEN)
        self.assertEqual(ProjectItem.objects.filter(project=project).count(), 6)
        self.assertEqual(ProjectMembership.objects.get(project=project).user, self.lead)
        guideline = Guideline.objects.get(project=project)
        self.assertIn("Filtering generated questions", guideline.body)

    def test_the_selection_and_sample_reach_the_queue(self) -> None:
        first = self.work.project_items.select_related("paper").order_by("position").first()
        assert first is not None
        assert first.paper is not None
        paper = first.paper
        data = self.form_data(
            paper_ids=f"{paper.external_id},\n", sample_size="2", seed="7", figure_types=["plot"], split="test-A"
        )
        data["calibration_size"] = "0"
        self.client.force_login(self.lead)
        self.client.post(reverse("project_create"), data)
        project = Project.objects.get(name="Second pass")
        self.assertEqual(
            project.selection,
            {
                "split": "test-A",
                "paper_ids": [paper.external_id],
                "figure_types": ["plot"],
                "sample_size": 2,
                "seed": 7,
            },
        )
        papers = set(ProjectItem.objects.filter(project=project).values_list("paper_id", flat=True))
        self.assertEqual((ProjectItem.objects.filter(project=project).count(), papers), (2, {paper.pk}))

    def test_own_guidelines_become_version_one(self) -> None:
        self.client.force_login(self.lead)
        self.client.post(reverse("project_create"), self.form_data(guidelines="# Ours\n\nKeep it short."))
        project = Project.objects.get(name="Second pass")
        self.assertEqual(Guideline.objects.get(project=project).body, "# Ours\n\nKeep it short.")

    def test_a_dataset_the_user_may_not_build_on_is_refused(self) -> None:
        foreign = DatasetFactory.create()
        QAItemFactory.create(dataset=foreign, paper=None)
        self.client.force_login(self.lead)
        response = self.client.post(reverse("project_create"), self.form_data(dataset=foreign.pk))
        self.assertEqual(response.status_code, 200)
        self.assertTrue(response.context["form"].has_error("dataset"))
        self.assertFalse(Project.objects.filter(name="Second pass").exists())

    def test_an_unknown_split_is_a_form_error(self) -> None:
        self.client.force_login(self.lead)
        response = self.client.post(reverse("project_create"), self.form_data(split="test-Z"))
        self.assertTrue(response.context["form"].has_error("split"))
        self.assertFalse(Project.objects.filter(name="Second pass").exists())

    def test_a_refusal_of_the_service_is_shown_and_nothing_is_created(self) -> None:
        self.client.force_login(self.lead)
        response = self.client.post(reverse("project_create"), self.form_data(paper_ids="no-such-paper"))
        self.assertContains(response, "The selection matches no items of this dataset.")
        response = self.client.post(reverse("project_create"), self.form_data(calibration_size="99"))
        self.assertContains(response, "The calibration set (99) is larger than the project (6).")
        self.assertFalse(Project.objects.filter(name="Second pass").exists())

    def test_out_of_range_settings_are_form_errors(self) -> None:
        self.client.force_login(self.lead)
        response = self.client.post(reverse("project_create"), self.form_data(overlap="11", lease_minutes="0"))
        form = response.context["form"]
        self.assertTrue(form.has_error("overlap") and form.has_error("lease_minutes"))
        self.assertFalse(Project.objects.filter(name="Second pass").exists())

    def test_staff_may_create_projects(self) -> None:
        self.client.force_login(self.admin)
        self.assertEqual(self.client.get(reverse("project_create")).status_code, 200)

    def test_someone_who_leads_nothing_gets_403(self) -> None:
        for user in (self.annotator, self.reviewer, self.outsider):
            self.client.force_login(user)
            with self.subTest(user=user.username):
                self.assertEqual(self.client.get(reverse("project_create")).status_code, 403)
                self.assertEqual(self.client.post(reverse("project_create"), self.form_data()).status_code, 403)
        self.assertFalse(Project.objects.filter(name="Second pass").exists())

    def test_a_visitor_who_is_not_logged_in_is_sent_to_login(self) -> None:
        response = self.client.get(reverse("project_create"))
        self.assertTrue(response["Location"].startswith(reverse("account_login")))

    def test_other_methods_get_405(self) -> None:
        self.client.force_login(self.lead)
        self.assertEqual(self.client.put(reverse("project_create")).status_code, 405)

    def test_an_htmx_post_is_told_where_to_go(self) -> None:
        self.client.force_login(self.lead)
        response = self.client.post(reverse("project_create"), self.form_data(), headers=HTMX)
        project = Project.objects.get(name="Second pass")
        self.assertEqual(response["HX-Redirect"], self.url("project_detail", project))


class ProjectDetailTests(ProjectPagesTestCase):
    def test_a_member_sees_settings_selection_members_and_the_rendered_guidelines(self) -> None:
        self.client.force_login(self.annotator)
        response = self.client.get(self.url("project_detail"))
        self.assertContains(response, "SPIQA filtering (keep / discard / modify)")
        self.assertContains(response, "<dt>Items in the queue</dt><dd>6</dd>", html=True)
        self.assertContains(response, "<h1>Filtering generated questions (SPIQA test-A)</h1>", html=True)
        self.assertContains(response, "<strong>keep</strong>", html=True)
        for user in (self.lead, self.annotator, self.annotator2, self.reviewer):
            self.assertContains(response, user.email)
        self.assertContains(response, "every split")

    def test_guidelines_are_sanitised_and_never_run_script(self) -> None:
        Guideline.objects.create(
            project=self.work,
            version=2,
            body='# Rules\n\n<script>alert(1)</script>\n\n<a href="javascript:alert(2)" onclick="x()">link</a>',
        )
        self.client.force_login(self.annotator)
        response = self.client.get(self.url("project_detail"))
        self.assertContains(response, "<h1>Rules</h1>", html=True)
        self.assertNotContains(response, "<script>alert")
        self.assertNotContains(response, "javascript:")
        self.assertNotContains(response, "onclick")

    def test_an_annotator_gets_no_dashboard_link_and_a_lead_does(self) -> None:
        dashboard = self.url("project_dashboard")
        self.client.force_login(self.annotator)
        self.assertNotContains(self.client.get(self.url("project_detail")), dashboard)
        self.client.force_login(self.lead)
        self.assertContains(self.client.get(self.url("project_detail")), dashboard)

    def test_an_outsider_gets_404(self) -> None:
        self.client.force_login(self.outsider)
        self.assertEqual(self.client.get(self.url("project_detail")).status_code, 404)

    def test_post_gets_405(self) -> None:
        self.client.force_login(self.lead)
        self.assertEqual(self.client.post(self.url("project_detail")).status_code, 405)

    def test_the_query_count_does_not_grow_with_items_or_members(self) -> None:
        bigger = spiqa_project(
            lead=self.lead, papers=5, per_paper=6, members=tuple(UserFactory.create() for _ in range(6))
        )
        self.client.force_login(self.lead)
        for project in (self.work, bigger):
            with self.subTest(project=project.pk), self.assertNumQueries(6):
                self.assertEqual(self.client.get(self.url("project_detail", project)).status_code, 200)


class GuidelineTests(ProjectPagesTestCase):
    def publish(self, body: str, **kwargs: Any) -> Any:
        return self.client.post(self.url("project_guidelines"), {"body": body, "note": "clearer"}, **kwargs)

    def test_a_member_reads_every_version_newest_first(self) -> None:
        Guideline.objects.create(
            project=self.work, version=2, body="Second **version**", note="Shorter", created_by=self.lead
        )
        self.client.force_login(self.annotator)
        response = self.client.get(self.url("project_guidelines"))
        self.assertContains(response, "<strong>version</strong>", html=True)
        content = response.content.decode()
        self.assertLess(content.index("Version 2"), content.index("Version 1"))
        self.assertContains(response, "Shorter")
        self.assertNotContains(response, "Publish a new version")

    def test_a_lead_publishes_a_new_version(self) -> None:
        self.client.force_login(self.lead)
        response = self.publish("# New rules", follow=True)
        self.assertRedirects(response, self.url("project_guidelines"))
        latest = Guideline.objects.filter(project=self.work).order_by("-version").first()
        assert latest is not None
        self.assertEqual(
            (latest.version, latest.body, latest.note, latest.created_by), (2, "# New rules", "clearer", self.lead)
        )
        self.assertContains(response, "Published version 2.")

    def test_publishing_the_same_text_again_makes_no_new_version(self) -> None:
        self.client.force_login(self.lead)
        self.publish("# New rules")
        response = self.publish("# New rules\n", follow=True)
        self.assertEqual(Guideline.objects.filter(project=self.work).count(), 2)
        self.assertContains(response, "the same as version 2; nothing new was published")

    def test_empty_guidelines_are_a_form_error(self) -> None:
        self.client.force_login(self.lead)
        response = self.publish("   ")
        self.assertEqual(response.status_code, 200)
        self.assertTrue(response.context["form"].has_error("body"))
        self.assertEqual(Guideline.objects.filter(project=self.work).count(), 1)

    def test_annotators_and_reviewers_may_not_publish(self) -> None:
        for user in (self.annotator, self.reviewer):
            self.client.force_login(user)
            with self.subTest(user=user.username):
                self.assertEqual(self.publish("# Mine").status_code, 403)
        self.assertEqual(Guideline.objects.filter(project=self.work).count(), 1)

    def test_an_outsider_gets_404_for_reading_and_publishing(self) -> None:
        self.client.force_login(self.outsider)
        self.assertEqual(self.client.get(self.url("project_guidelines")).status_code, 404)
        self.assertEqual(self.publish("# Mine").status_code, 404)

    def test_other_methods_get_405(self) -> None:
        self.client.force_login(self.lead)
        self.assertEqual(self.client.delete(self.url("project_guidelines")).status_code, 405)

    def test_an_htmx_publish_is_told_to_reload_the_page(self) -> None:
        self.client.force_login(self.lead)
        response = self.publish("# New rules", headers=HTMX)
        self.assertEqual(response["HX-Redirect"], self.url("project_guidelines"))
        self.assertEqual(Guideline.objects.filter(project=self.work).count(), 2)


class MemberTests(ProjectPagesTestCase):
    def invite(self, email: str, role: str = Role.ANNOTATOR, **kwargs: Any) -> Any:
        with self.captureOnCommitCallbacks(execute=True):
            return self.client.post(self.url("project_members"), {"email": email, "role": role}, **kwargs)

    def test_members_see_the_member_list_and_only_leads_the_invite_form(self) -> None:
        self.client.force_login(self.annotator)
        response = self.client.get(self.url("project_members"))
        self.assertContains(response, self.reviewer.email)
        self.assertNotContains(response, "Invite by email")
        self.client.force_login(self.lead)
        self.assertContains(self.client.get(self.url("project_members")), "Invite by email")

    def test_a_lead_invites_a_new_person_with_a_role(self) -> None:
        self.client.force_login(self.lead)
        response = self.invite("New.Person@Example.org", Role.REVIEWER, follow=True)
        self.assertRedirects(response, self.url("project_members"))
        user = User.objects.get(email="new.person@example.org")
        self.assertEqual(ProjectMembership.objects.get(project=self.work, user=user).role, Role.REVIEWER)
        self.assertEqual([message.to for message in mail.outbox], [["new.person@example.org"]])
        self.assertContains(response, "Added new.person@example.org as reviewer")

    def test_inviting_someone_with_an_account_adds_them(self) -> None:
        self.client.force_login(self.lead)
        self.invite(self.outsider.email)
        self.assertEqual(ProjectMembership.objects.get(project=self.work, user=self.outsider).role, Role.ANNOTATOR)

    def test_the_same_invitation_twice_adds_nobody_twice_and_keeps_the_role(self) -> None:
        self.client.force_login(self.lead)
        self.invite(self.outsider.email, Role.REVIEWER)
        response = self.invite(self.outsider.email, Role.LEAD, follow=True)
        self.assertEqual(ProjectMembership.objects.get(project=self.work, user=self.outsider).role, Role.REVIEWER)
        self.assertEqual(User.objects.filter(email=self.outsider.email).count(), 1)
        self.assertContains(response, "already a member as reviewer; nothing changed")

    def test_a_deactivated_account_is_a_form_error(self) -> None:
        User.objects.filter(pk=self.outsider.pk).update(is_active=False)
        self.client.force_login(self.lead)
        response = self.invite(self.outsider.email)
        self.assertEqual(response.status_code, 200)
        self.assertTrue(response.context["form"].has_error("email"))
        self.assertFalse(ProjectMembership.objects.filter(project=self.work, user=self.outsider).exists())

    def test_annotators_and_reviewers_may_not_invite(self) -> None:
        for user in (self.annotator, self.reviewer):
            self.client.force_login(user)
            with self.subTest(user=user.username):
                self.assertEqual(self.invite("someone@example.org").status_code, 403)
        self.assertFalse(User.objects.filter(email="someone@example.org").exists())

    def test_an_outsider_gets_404(self) -> None:
        self.client.force_login(self.outsider)
        self.assertEqual(self.client.get(self.url("project_members")).status_code, 404)
        self.assertEqual(self.invite("someone@example.org").status_code, 404)
        self.assertFalse(User.objects.filter(email="someone@example.org").exists())

    def test_other_methods_get_405(self) -> None:
        self.client.force_login(self.lead)
        self.assertEqual(self.client.put(self.url("project_members")).status_code, 405)

    def test_an_htmx_invite_is_told_to_reload_the_page(self) -> None:
        self.client.force_login(self.lead)
        response = self.invite(self.outsider.email, headers=HTMX)
        self.assertEqual(response["HX-Redirect"], self.url("project_members"))
        self.assertTrue(ProjectMembership.objects.filter(project=self.work, user=self.outsider).exists())


class AssignmentTests(ProjectPagesTestCase):
    fixed: Project

    @classmethod
    def setUpTestData(cls) -> None:
        super().setUpTestData()
        cls.fixed = spiqa_project(
            lead=cls.lead, members=(cls.annotator, cls.annotator2), assignment_mode=AssignmentMode.FIXED
        )
        MembershipFactory.create(project=cls.fixed, user=cls.reviewer, role=Role.REVIEWER)

    def paper_ids(self) -> list[str]:
        return list(
            self.fixed.project_items.order_by("position").values_list("paper__external_id", flat=True).distinct()
        )

    def assign(self, data: dict[str, Any], **kwargs: Any) -> Any:
        return self.client.post(self.url("project_assignments", self.fixed), data, **kwargs)

    def test_a_lead_assigns_a_paper_and_an_item_to_an_annotator(self) -> None:
        item = self.fixed.project_items.order_by("-position").select_related("item").first()
        assert item is not None
        self.client.force_login(self.lead)
        data = {"annotator": self.annotator.pk, "paper_ids": self.paper_ids()[0], "item_ids": item.item.external_id}
        response = self.assign(data, follow=True)
        self.assertRedirects(response, self.url("project_assignments", self.fixed))
        self.assertContains(response, "2 new assignments")
        assignments = Assignment.objects.filter(project=self.fixed, annotator=self.annotator)
        self.assertEqual(assignments.filter(paper__external_id=self.paper_ids()[0]).count(), 1)
        self.assertEqual(assignments.filter(project_item=item).count(), 1)
        self.assertContains(response, self.paper_ids()[0])

    def test_assigning_the_same_papers_again_changes_nothing(self) -> None:
        self.client.force_login(self.lead)
        data = {"annotator": self.annotator.pk, "paper_ids": ", ".join(self.paper_ids())}
        self.assign(data)
        response = self.assign(data, follow=True)
        self.assertEqual(Assignment.objects.filter(project=self.fixed).count(), 2)
        self.assertContains(response, "already had all of these; nothing changed")

    def test_an_unknown_paper_changes_nothing_and_is_reported(self) -> None:
        self.client.force_login(self.lead)
        response = self.assign({"annotator": self.annotator.pk, "paper_ids": f"{self.paper_ids()[0]}\nnope"})
        self.assertContains(response, "No such paper in the dataset: nope.")
        self.assertFalse(Assignment.objects.filter(project=self.fixed).exists())

    def test_someone_outside_the_project_cannot_be_chosen(self) -> None:
        self.client.force_login(self.lead)
        response = self.assign({"annotator": self.outsider.pk, "paper_ids": self.paper_ids()[0]})
        self.assertTrue(response.context["form"].has_error("annotator"))
        self.assertFalse(Assignment.objects.filter(project=self.fixed).exists())

    def test_neither_papers_nor_items_is_a_form_error(self) -> None:
        self.client.force_login(self.lead)
        response = self.assign({"annotator": self.annotator.pk, "paper_ids": " ", "item_ids": ""})
        self.assertContains(response, "Give paper ids, item ids or both.")

    def test_the_page_says_when_assignments_have_no_effect(self) -> None:
        self.client.force_login(self.lead)
        self.assertContains(self.client.get(self.url("project_assignments")), "assignments have no effect")
        self.assertContains(
            self.client.get(self.url("project_assignments", self.fixed)), "This project is in fixed mode"
        )

    def test_a_reviewer_reads_assignments_but_may_not_assign(self) -> None:
        self.client.force_login(self.reviewer)
        response = self.client.get(self.url("project_assignments", self.fixed))
        self.assertEqual(response.status_code, 200)
        self.assertNotContains(response, "Assign papers or items")
        self.assertEqual(
            self.assign({"annotator": self.annotator.pk, "paper_ids": self.paper_ids()[0]}).status_code, 403
        )
        self.assertFalse(Assignment.objects.filter(project=self.fixed).exists())

    def test_an_annotator_gets_403(self) -> None:
        self.client.force_login(self.annotator)
        self.assertEqual(self.client.get(self.url("project_assignments", self.fixed)).status_code, 403)
        self.assertEqual(
            self.assign({"annotator": self.annotator.pk, "paper_ids": self.paper_ids()[0]}).status_code, 403
        )

    def test_an_outsider_gets_404(self) -> None:
        self.client.force_login(self.outsider)
        self.assertEqual(self.client.get(self.url("project_assignments", self.fixed)).status_code, 404)
        self.assertEqual(
            self.assign({"annotator": self.outsider.pk, "paper_ids": self.paper_ids()[0]}).status_code, 404
        )

    def test_other_methods_get_405(self) -> None:
        self.client.force_login(self.lead)
        self.assertEqual(self.client.patch(self.url("project_assignments", self.fixed)).status_code, 405)

    def test_an_htmx_assignment_is_told_to_reload_the_page(self) -> None:
        self.client.force_login(self.lead)
        response = self.assign({"annotator": self.annotator.pk, "paper_ids": self.paper_ids()[0]}, headers=HTMX)
        self.assertEqual(response["HX-Redirect"], self.url("project_assignments", self.fixed))
        self.assertEqual(Assignment.objects.filter(project=self.fixed).count(), 1)


class HomeTests(ProjectPagesTestCase):
    def test_home_links_each_project_and_the_dashboard_only_for_reviewers_and_leads(self) -> None:
        self.client.force_login(self.annotator)
        response = self.client.get(reverse("home"))
        self.assertContains(response, self.url("project_detail"))
        self.assertContains(response, self.url("workbench_next"))
        self.assertNotContains(response, self.url("project_dashboard"))
        self.assertNotContains(response, reverse("project_create"))
        self.client.force_login(self.lead)
        response = self.client.get(reverse("home"))
        self.assertContains(response, self.url("project_dashboard"))
        self.assertContains(response, reverse("project_create"))
