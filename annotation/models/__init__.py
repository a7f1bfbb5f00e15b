"""The annotation app's models: the corpus, projects and their queues, annotation records."""

from __future__ import annotations

from annotation.models.corpus import (
    CandidateAnswer,
    ContentType,
    Dataset,
    Evidence,
    Figure,
    ImportJob,
    Paper,
    PaperCluster,
    PaperClusterMember,
    QAItem,
    SourceFormat,
)
from annotation.models.projects import (
    MAX_LEASE_SECONDS,
    MAX_OVERLAP,
    MIN_LEASE_SECONDS,
    ROLE_RANK,
    Assignment,
    AssignmentMode,
    Guideline,
    Project,
    ProjectItem,
    ProjectMembership,
    ReviewScope,
    Role,
)
from annotation.models.records import Annotation, AnnotationRevision, AnnotationStatus

__all__ = [
    "MAX_LEASE_SECONDS",
    "MAX_OVERLAP",
    "MIN_LEASE_SECONDS",
    "ROLE_RANK",
    "Annotation",
    "AnnotationRevision",
    "AnnotationStatus",
    "Assignment",
    "AssignmentMode",
    "CandidateAnswer",
    "ContentType",
    "Dataset",
    "Evidence",
    "Figure",
    "Guideline",
    "ImportJob",
    "Paper",
    "PaperCluster",
    "PaperClusterMember",
    "Project",
    "ProjectItem",
    "ProjectMembership",
    "QAItem",
    "ReviewScope",
    "Role",
    "SourceFormat",
]
