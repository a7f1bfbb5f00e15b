"""The judge registry and the shared request types."""

from __future__ import annotations

import hashlib

import pytest

from evaluation.judges import JUDGES, judge_get, l3score, m3sciqa, qaeval_extract, scidqa
from evaluation.judges.base import PromptTemplate, RequestProfile, substitute_once


def test_the_registry_names_the_four_judges_of_issue_6():
    assert set(JUDGES) == {"l3score", "qaeval", "m3sciqa", "scidqa"}
    assert all(judge.name == name for name, judge in JUDGES.items())


def test_each_judge_points_at_its_module_and_defaults():
    assert judge_get("l3score").module == "evaluation.judges.l3score"
    assert judge_get("l3score").default_profile is l3score.SPIQA_PARITY
    assert judge_get("m3sciqa").default_template is m3sciqa.CODE_TEMPLATE
    assert judge_get("scidqa").template("scidqa-score-extraction-fig13") is scidqa.EXTRACTOR_TEMPLATE


def test_the_registry_carries_the_extraction_prompt_and_both_scidqa_modes():
    assert judge_get("qaeval").template("qaextract-guidelines-quire-1") is qaeval_extract.EXTRACT_TEMPLATE
    assert judge_get("scidqa").default_template is scidqa.FIXED_JUDGE_TEMPLATE
    assert judge_get("scidqa").template("scidqa-judge-coarsegrained") is scidqa.JUDGE_TEMPLATE


def test_only_l3score_needs_logprobs():
    assert [name for name, judge in JUDGES.items() if judge.needs_logprobs] == ["l3score"]


def test_template_versions_and_hashes_are_unique_across_judges():
    templates = [template for judge in JUDGES.values() for template in judge.templates]
    assert len({template.version for template in templates}) == len(templates)
    assert len({template.sha256 for template in templates}) == len(templates)


def test_an_unknown_judge_or_template_is_a_lookup_error():
    with pytest.raises(LookupError, match="known judges: l3score, m3sciqa, qaeval, scidqa"):
        judge_get("bleurt")
    with pytest.raises(LookupError, match="no template"):
        judge_get("l3score").template("spiqa-l3score-with-blank-lines")


def test_a_template_hashes_its_utf8_bytes():
    template = PromptTemplate(version="v", text="don\u2019t")
    assert template.sha256 == hashlib.sha256("don\u2019t".encode()).hexdigest()


def test_a_profile_sends_only_the_parameters_it_sets():
    body = RequestProfile(name="p", temperature=0.0).body(model="m", messages=[])
    assert body == {"model": "m", "messages": [], "temperature": 0.0}


def test_single_pass_substitution_replaces_each_marker_once_in_template_order():
    text = substitute_once("<b> then <a> then <a>", {"<a>": "<b>", "<b>": "<a>"})
    assert text == "<a> then <b> then <a>"
