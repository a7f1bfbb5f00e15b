"""The scripted-annotation API (DRF, token auth): claim the next item, submit an annotation,
list my annotations; plus the OpenAPI schema and its docs page.

One APIView per operation: it parses input, fetches the project through access.py (outsiders
get a JSON 404), calls one service and renders the result. Refusals are ApplicationErrors,
which annotation.api_errors turns into ``{"detail": ..., "errors": {...}}`` with their status.
"""

from __future__ import annotations

from django import forms
from django.db.models import QuerySet
from django.urls import URLPattern, path
from drf_spectacular.utils import (
    OpenApiExample,
    OpenApiResponse,
    PolymorphicProxySerializer,
    extend_schema,
    inline_serializer,
)
from drf_spectacular.views import SpectacularAPIView, SpectacularSwaggerSplitView
from rest_framework import serializers, status
from rest_framework.pagination import PageNumberPagination
from rest_framework.parsers import JSONParser
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.views import APIView

from accounts.models import User
from annotation.access import project_get_for_user
from annotation.models import Annotation, AnnotationRevision, AnnotationStatus, Figure, Project, Role
from annotation.services.queue import MAX_ACTIVE_MS, SubmitOutcome, annotation_submit, lease_claim
from annotation.workflows import get_workflow, workflow_choices

FULL_DETAIL = (
    "The item already has all the annotations it needs. Your work was kept as a draft and not "
    "counted; claim the next item to go on."
)

PAYLOAD_DESCRIPTION = """\
The annotation in the canonical JSON of the project's workflow. The server checks it with the
same rules as the workbench form and answers 400 with the errors per field when it fails.
"""


def _field_reference(name: str, field: forms.Field) -> str:
    many = isinstance(field, forms.MultipleChoiceField)
    choices = [str(value) for value, _ in getattr(field, "choices", ()) if value != ""]
    if choices:
        allowed = ("a list of " if many else "one of ") + ", ".join(f'"{value}"' for value in choices)
    elif isinstance(field, forms.ChoiceField):
        allowed = "values that depend on the item (" + ("a list" if many else "one") + ")"
    elif isinstance(field, forms.BooleanField):
        allowed = "true or false"
    else:
        allowed = "text"
    return f"- `{name}`{' (always required)' if field.required else ''}: {allowed}"


def _workflows_reference() -> str:
    """Each workflow's payload: its own description where it wrote one, else the fields of its
    form, so the reference never lags behind a new plug-in. Configured workflows (rubrics) say so."""
    sections = []
    for name, _label in workflow_choices():
        workflow = get_workflow(name)
        body = workflow.payload_doc.strip("\n")
        if not body:
            body = "\n".join(_field_reference(n, f) for n, f in workflow.form_class.base_fields.items())
        if not body:
            body = "- one field per criterion of the project's rubric, keyed as the rubric names them"
        sections.append(f"**{name}** ({workflow.description})\n\n{body}")
    return "\n\n".join(sections)


PAYLOAD_DESCRIPTION += "\n" + _workflows_reference() + "\n"

SUBMIT_DESCRIPTION = f"""\
Submit an annotation of an item you claimed. Send a fresh `client_token` (a UUID, say) with
every submit and the same one when you retry it: a retried request then stores nothing new
and answers 200 with `"result": "replayed"`.

Answers 201 for a first submit or an edit of your submitted annotation (each one a new
revision), 409 when the item already had all its annotations (your work is kept as a draft),
when you have not claimed the item, or when a reviewer locked it.

{PAYLOAD_DESCRIPTION}"""

SPIQA_EXAMPLE = {
    "payload": {
        "answerable_from_figure": "yes",
        "decision": "keep",
        "discard_reasons": [],
        "modify": "no",
        "evidence_figures": ["1805.01234v2-Figure1-1.png"],
        "figure_type": "plot",
    },
    "client_token": "3f0c2a9e-5b1d-4d8e-9a57-1c2b3d4e5f60",
    "active_ms": 41250,
}
QASCORE_EXAMPLE = {
    "payload": {"extracted_answer": "taller and sharper", "no_answer": False, "score": 0.5, "note": ""},
    "client_token": "b7e1d2c3-0a4f-4e6d-8c9b-2a3b4c5d6e7f",
    "active_ms": 18000,
}


# Built inline because a declared field named "errors" would shadow Serializer.errors for the type checker.
ErrorSerializer = inline_serializer(
    name="Error",
    fields={
        "detail": serializers.CharField(),
        "errors": serializers.DictField(
            child=serializers.ListField(child=serializers.CharField()),
            help_text="Messages per input field; '__all__' for the annotation as a whole.",
        ),
    },
)


class DetailSerializer(serializers.Serializer):
    detail = serializers.CharField()

    class Meta:
        ref_name = "Detail"


NOT_FOUND = OpenApiResponse(DetailSerializer, description="No such project (or you are not a member of it).")
NOT_AUTHENTICATED = OpenApiResponse(DetailSerializer, description="No token, or an unknown one.")
TAGS = ["annotation"]


def _annotator(request: Request) -> User:
    # IsAuthenticated has run before any handler, so this is a signed-in user.
    assert isinstance(request.user, User)
    return request.user


def _project(request: Request, project_id: int) -> Project:
    return project_get_for_user(_annotator(request), project_id, role=Role.ANNOTATOR)


class LeaseClaimApi(APIView):
    class OutputSerializer(serializers.Serializer):
        class ItemSerializer(serializers.Serializer):
            class CandidateSerializer(serializers.Serializer):
                id = serializers.IntegerField()
                system_name = serializers.CharField()
                text = serializers.CharField()

                class Meta:
                    ref_name = "ClaimedCandidate"

            id = serializers.IntegerField(source="item.id")
            external_id = serializers.CharField(source="item.external_id")
            split = serializers.CharField(source="item.split")
            question = serializers.CharField(
                source="item.question", help_text="Empty for workflows that write the question from the figure."
            )
            answer = serializers.CharField(source="item.answer", help_text="Empty when the question is.")
            paper = serializers.CharField(
                source="item.paper.external_id", allow_null=True, help_text="The paper's external id."
            )
            candidate = CandidateSerializer(
                allow_null=True, help_text="The model answer to rate, for answer-rating workflows."
            )
            shown = serializers.DictField(
                default=dict,
                help_text=(
                    "What the workflow shows besides the item, e.g. a pairwise rubric's two answers: "
                    '{"pair": [{"letter": "A", "text": ...}, {"letter": "B", "text": ...}]}, in the order shown.'
                ),
            )
            figures = serializers.ListField(
                child=serializers.CharField(),
                default=list,
                help_text="File names of the paper's figures and tables, in order: the values evidence_figures takes.",
            )

            class Meta:
                ref_name = "ClaimedItem"

        annotation = serializers.IntegerField(source="pk")
        project_item = serializers.IntegerField(source="project_item_id")
        status = serializers.ChoiceField(choices=AnnotationStatus.choices)
        lease_expires_at = serializers.DateTimeField(allow_null=True)
        payload = serializers.DictField(help_text="Your record's current payload: {} for a new claim.")
        guideline_version = serializers.IntegerField(
            source="guideline.version", allow_null=True, help_text="The guidelines in force when you claimed it."
        )
        item = ItemSerializer(source="project_item")

        class Meta:
            ref_name = "Claim"

    @extend_schema(
        operation_id="claim_next_item",
        summary="Claim the next item",
        description=(
            "Lease the next item of your queue to you for the project's lease time: your current draft if you "
            "have one, else a new item, else one you skipped. Claiming again before you submit returns the "
            "same item. Answers 204 when nothing is left for you."
        ),
        tags=TAGS,
        request=None,
        responses={
            200: OutputSerializer,
            204: OpenApiResponse(description="Nothing is left for you in this project."),
            401: NOT_AUTHENTICATED,
            404: NOT_FOUND,
            409: OpenApiResponse(ErrorSerializer, description="The queue is busy; try again."),
        },
    )
    def post(self, request: Request, project_id: int) -> Response:
        project = _project(request, project_id)
        claimed = lease_claim(project=project, annotator=_annotator(request))
        if claimed is None:
            return Response(status=status.HTTP_204_NO_CONTENT)
        record = Annotation.objects.select_related(
            "project_item__item__paper", "project_item__candidate", "guideline"
        ).get(pk=claimed.pk)
        data = self.OutputSerializer(record).data
        workflow = get_workflow(project.workflow)
        if workflow.hides_item_text:
            data["item"]["question"] = data["item"]["answer"] = ""
        data["item"]["shown"] = workflow.api_context(record.project_item)
        paper_id = record.project_item.item.paper_id
        data["item"]["figures"] = (
            list(
                Figure.objects.filter(paper_id=paper_id).order_by("position", "pk").values_list("file_name", flat=True)
            )
            if paper_id is not None
            else []
        )
        return Response(data)


class AnnotationSubmitApi(APIView):
    # A payload is a JSON object; form encodings cannot carry one.
    parser_classes = [JSONParser]

    class InputSerializer(serializers.Serializer):
        payload = serializers.DictField(
            help_text="The annotation in the canonical JSON of the project's workflow (see the description)."
        )
        client_token = serializers.CharField(
            max_length=64,
            default="",
            allow_blank=True,
            help_text="Your id for this submit; a retry with the same token stores nothing new.",
        )
        active_ms = serializers.IntegerField(
            min_value=0,
            max_value=MAX_ACTIVE_MS,
            required=False,
            help_text="Time spent on the item in ms; the record keeps the largest value sent.",
        )

        class Meta:
            ref_name = "SubmitRequest"

    class OutputSerializer(serializers.Serializer):
        annotation = serializers.IntegerField()
        revision = serializers.IntegerField(help_text="The number of the revision this submit stored.")
        result = serializers.ChoiceField(choices=["stored", "replayed"])

        class Meta:
            ref_name = "SubmitResult"

    class FullSerializer(serializers.Serializer):
        detail = serializers.CharField()
        result = serializers.ChoiceField(choices=["full"])

        class Meta:
            ref_name = "SubmitFull"

    @extend_schema(
        operation_id="submit_annotation",
        summary="Submit an annotation",
        description=SUBMIT_DESCRIPTION,
        tags=TAGS,
        request=InputSerializer,
        responses={
            201: OpenApiResponse(OutputSerializer, description="Stored: a first submit or an edit."),
            200: OpenApiResponse(OutputSerializer, description="Replayed: this client_token was stored before."),
            400: OpenApiResponse(ErrorSerializer, description="The payload breaks the workflow's rules."),
            401: NOT_AUTHENTICATED,
            404: OpenApiResponse(DetailSerializer, description="No such project, or the item is not in it."),
            409: OpenApiResponse(
                PolymorphicProxySerializer(
                    component_name="SubmitConflict",
                    serializers=[FullSerializer, ErrorSerializer],
                    resource_type_field_name=None,
                ),
                description=(
                    'The item was full ("result": "full": your work is kept as a draft), or you have not claimed '
                    "it, or a reviewer locked it (an error without result)."
                ),
            ),
        },
        examples=[
            OpenApiExample("spiqa_filter", value=SPIQA_EXAMPLE, request_only=True),
            OpenApiExample("qascore_rating", value=QASCORE_EXAMPLE, request_only=True),
        ],
    )
    def post(self, request: Request, project_id: int, project_item_id: int) -> Response:
        project = _project(request, project_id)
        serializer = self.InputSerializer(data=request.data)
        serializer.is_valid(raise_exception=True)
        data = serializer.validated_data
        outcome = annotation_submit(
            project=project,
            project_item_id=project_item_id,
            annotator=_annotator(request),
            payload=data["payload"],
            client_token=data["client_token"],
            active_ms=data.get("active_ms"),
        )
        if outcome.result == "full":
            return Response({"detail": FULL_DETAIL, "result": "full"}, status=status.HTTP_409_CONFLICT)
        body = {"annotation": outcome.annotation.pk, "revision": _revision_number(outcome, data["client_token"])}
        if outcome.result == "replayed":
            return Response(self.OutputSerializer({**body, "result": "replayed"}).data)
        return Response(self.OutputSerializer({**body, "result": "stored"}).data, status=status.HTTP_201_CREATED)


def _revision_number(outcome: SubmitOutcome, client_token: str) -> int:
    """The revision this submit stored; for a replay, the one stored when the token was first sent."""
    if outcome.result != "replayed":
        return outcome.annotation.revision_count
    numbers = AnnotationRevision.objects.filter(annotation=outcome.annotation, client_token=client_token)
    return numbers.values_list("number", flat=True).get()


class AnnotationPagination(PageNumberPagination):
    page_size = 50
    page_size_query_param = "page_size"
    max_page_size = 200


class AnnotationListMineApi(APIView):
    pagination_class = AnnotationPagination

    class FilterSerializer(serializers.Serializer):
        status = serializers.ChoiceField(
            choices=AnnotationStatus.choices, required=False, help_text="Only your annotations in this status."
        )

        class Meta:
            ref_name = "MyAnnotationsFilter"

    class OutputSerializer(serializers.Serializer):
        class CandidateSerializer(serializers.Serializer):
            id = serializers.IntegerField()
            system_name = serializers.CharField()

            class Meta:
                ref_name = "MyAnnotationCandidate"

        annotation = serializers.IntegerField(source="pk")
        project_item = serializers.IntegerField(source="project_item_id")
        external_id = serializers.CharField(source="project_item.item.external_id", help_text="The QA item's id.")
        candidate = CandidateSerializer(source="project_item.candidate", allow_null=True)
        status = serializers.ChoiceField(choices=AnnotationStatus.choices)
        payload = serializers.DictField()
        guideline_version = serializers.IntegerField(source="guideline.version", allow_null=True)
        active_ms = serializers.IntegerField()
        submitted_at = serializers.DateTimeField(allow_null=True)
        updated_at = serializers.DateTimeField()
        revision_count = serializers.IntegerField()

        class Meta:
            ref_name = "MyAnnotation"

    @extend_schema(
        operation_id="list_my_annotations",
        summary="List my annotations",
        description=(
            "Your own annotation records in the project, most recently changed first; never anybody else's. "
            "50 per page; ask for up to 200 with page_size."
        ),
        tags=TAGS,
        parameters=[FilterSerializer],
        responses={200: OutputSerializer(many=True), 400: ErrorSerializer, 401: NOT_AUTHENTICATED, 404: NOT_FOUND},
    )
    def get(self, request: Request, project_id: int) -> Response:
        project = _project(request, project_id)
        filters = self.FilterSerializer(data=request.query_params)
        filters.is_valid(raise_exception=True)
        records = _my_annotations(project, _annotator(request), filters.validated_data.get("status"))
        paginator = self.pagination_class()
        page = paginator.paginate_queryset(records, request, view=self)
        return paginator.get_paginated_response(self.OutputSerializer(page, many=True).data)


def _my_annotations(project: Project, annotator: User, status_filter: str | None) -> QuerySet[Annotation]:
    records = Annotation.objects.filter(project=project, annotator=annotator)
    if status_filter:
        records = records.filter(status=status_filter)
    return records.select_related("project_item__item", "project_item__candidate", "guideline").order_by(
        "-updated_at", "-pk"
    )


class ApiDocsView(SpectacularSwaggerSplitView):
    # drf-spectacular's own page carries an inline <style>, which the CSP blocks.
    template_name = "annotation/api_docs.html"


urlpatterns: list[URLPattern] = [
    path("projects/<int:project_id>/claim/", LeaseClaimApi.as_view(), name="api_claim"),
    path(
        "projects/<int:project_id>/items/<int:project_item_id>/submit/",
        AnnotationSubmitApi.as_view(),
        name="api_submit",
    ),
    path("projects/<int:project_id>/annotations/mine/", AnnotationListMineApi.as_view(), name="api_my_annotations"),
    path("schema/", SpectacularAPIView.as_view(), name="api_schema"),
    path("docs/", ApiDocsView.as_view(url_name="api_schema"), name="api_docs"),
]
