"""The judges Quire can run, by name. Each judge module holds a request builder and pure
parsing or scoring functions; this registry says what each of the four paper judges is and
which prompts and request profiles it may use, so a judge run can be validated before
anything is sent. ``custom`` (a lead-written prompt) and the offline metrics (exact match,
relaxed accuracy, ROUGE-L) are judges too: `judge_names()` lists every name, and
`requests_for` / `score_for` / `judge_item` (protocol.py) run any of them on one item."""

from __future__ import annotations

from dataclasses import dataclass

from evaluation.judges import l3score, m3sciqa, qaeval, qaeval_extract, scidqa
from evaluation.judges.base import PromptTemplate, RequestProfile


@dataclass(frozen=True, slots=True)
class JudgeInfo:
    name: str
    title: str
    module: str
    scale: str
    default_model: str
    templates: tuple[PromptTemplate, ...]
    profiles: tuple[RequestProfile, ...]
    # L3Score reads first-token log-probabilities, so a model that refuses logprobs
    # (reasoning models among them) cannot serve as its judge.
    needs_logprobs: bool = False

    @property
    def default_template(self) -> PromptTemplate:
        return self.templates[0]

    @property
    def default_profile(self) -> RequestProfile:
        return self.profiles[0]

    def template(self, version: str) -> PromptTemplate:
        for template in self.templates:
            if template.version == version:
                return template
        raise LookupError(f"judge {self.name!r} has no template {version!r}")


JUDGES: dict[str, JudgeInfo] = {
    judge.name: judge
    for judge in (
        JudgeInfo(
            name="l3score",
            title="L3Score (SPIQA)",
            module=l3score.__name__,
            scale="probability of yes against no, 0-1",
            default_model=l3score.DEFAULT_MODEL,
            templates=(l3score.TEMPLATE,),
            profiles=(l3score.SPIQA_PARITY, l3score.ONE_TOKEN),
            needs_logprobs=True,
        ),
        JudgeInfo(
            name="qaeval",
            title="QAEval rule scorer with the Fig. 4 judge as fallback",
            module=qaeval.__name__,
            scale="0 / 0.5 / 1",
            default_model=qaeval.DEFAULT_MODEL,
            templates=(qaeval.TEMPLATE, qaeval_extract.EXTRACT_TEMPLATE),
            profiles=(qaeval.PROFILE, qaeval_extract.EXTRACT_PROFILE),
        ),
        JudgeInfo(
            name="m3sciqa",
            title="M3SciQA answer judge",
            module=m3sciqa.__name__,
            scale="0 / 0.5 / 1",
            default_model=m3sciqa.DEFAULT_MODEL,
            templates=(m3sciqa.CODE_TEMPLATE, m3sciqa.PAPER_TEMPLATE),
            profiles=(m3sciqa.PROFILE,),
        ),
        JudgeInfo(
            name="scidqa",
            title="SciDQA four-aspect judge",
            module=scidqa.__name__,
            scale="overall 1-10, stored x10",
            default_model=scidqa.DEFAULT_JUDGE_MODEL,
            templates=(scidqa.FIXED_JUDGE_TEMPLATE, scidqa.JUDGE_TEMPLATE, scidqa.EXTRACTOR_TEMPLATE),
            profiles=(scidqa.JUDGE_PROFILE, scidqa.EXTRACTOR_PROFILE),
        ),
    )
}


def judge_get(name: str) -> JudgeInfo:
    try:
        return JUDGES[name]
    except KeyError:
        raise LookupError(f"unknown judge {name!r}; known judges: {', '.join(sorted(JUDGES))}") from None


# The item-level protocol the engine calls; imported last because it builds on the judge
# modules above.
from evaluation.judges.protocol import (  # noqa: E402
    CUSTOM,
    OFFLINE_METRICS,
    JudgeOutcome,
    judge_item,
    judge_names,
    needs_endpoint,
    requests_for,
    score_for,
    validate_config,
)

__all__ = [
    "CUSTOM",
    "JUDGES",
    "OFFLINE_METRICS",
    "JudgeInfo",
    "JudgeOutcome",
    "judge_get",
    "judge_item",
    "judge_names",
    "needs_endpoint",
    "requests_for",
    "score_for",
    "validate_config",
]
