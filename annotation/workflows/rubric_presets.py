"""The shipped rubric presets, each a rubric configuration as a project stores it (see
``rubrics.py`` for the schema). Text in quotation marks in the sources is kept verbatim:
SciDQA's judge aspects (shared/reference/scidqa.md §8, §10), VinQA's GroUSE and G-Eval rubrics
(vinqa-rubrics.md §1-2) and SPIQA's crowd pilot and authorship question (spiqa.md §3-4).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any


@dataclass(frozen=True, slots=True)
class Preset:
    label: str
    config: dict[str, Any]


def _points(*entries: tuple[int, str, str]) -> list[dict[str, Any]]:
    return [{"value": value, "label": label, "description": description} for value, label, description in entries]


def _aspect(key: str, label: str, description: str) -> dict[str, Any]:
    return {
        "key": key,
        "label": label,
        "description": description,
        "scale": {"type": "range", "min": 1, "max": 10, "step": 1, "anchors": {"1": "poor", "10": "excellent"}},
    }


YES_NO = [{"value": "yes", "label": "Yes", "description": ""}, {"value": "no", "label": "No", "description": ""}]

# SciDQA's LLM judge (shared/reference/scidqa.md §8): four aspects, each 1-10, in the prompt's words.
SCIDQA_ASPECTS: dict[str, Any] = {
    "name": "SciDQA: four aspects (1-10)",
    "version": 1,
    "unit": "candidate",
    "instructions": (
        "Carefully read the original question, the model-generated answer, and the gold correct answer. "
        "Evaluate the model-generated answer on the following dimensions, providing a score from 1-10 for each "
        "(where 1 is poor and 10 is excellent)."
    ),
    "context": {"paper": 1, "question": 1, "answers": 1, "gold_answer": 1},
    "criteria": [
        _aspect("relevance", "Relevance", "How well does the answer address the specific question asked?"),
        _aspect(
            "accuracy",
            "Accuracy",
            "To what extent is the information provided correct and aligned with the gold answer?",
        ),
        _aspect(
            "completeness",
            "Completeness",
            "How thoroughly does the answer cover all aspects of the question compared to the gold answer?",
        ),
        _aspect(
            "conciseness", "Conciseness", "Does the answer provide information efficiently without unnecessary details?"
        ),
    ],
}

# VinQA's per-answer GroUSE criteria (shared/reference/vinqa-rubrics.md §1). The definitions are
# verbatim; VinQA prints no level descriptions, so those of 1-5 and 0/1 are Quire's own (version 1).
VINQA_ANSWER: dict[str, Any] = {
    "name": "VinQA: answer rubric (GroUSE)",
    "version": 1,
    "unit": "candidate",
    "instructions": (
        "Rate the answer against the question and the retrieved context: its figures and tables, shown as "
        "images with their descriptions. The criteria are VinQA's (§5.1, from GroUSE); the level descriptions "
        "are Quire's own (rubric version 1), since VinQA prints none."
    ),
    "context": {"paper": 1, "question": 1, "answers": 1, "figure": 1, "caption": 1},
    "criteria": [
        {
            "key": "relevancy",
            "label": "Relevancy",
            "description": "whether the answer correctly addresses the question",
            "scale": {
                "type": "points",
                "points": _points(
                    (1, "Does not address the question", "The answer does not address the question asked."),
                    (2, "Barely addresses it", "The answer touches the question but misses what it asks."),
                    (3, "Partly addresses it", "Part of the question is addressed correctly; part is not."),
                    (4, "Mostly addresses it", "The question is addressed correctly, with minor gaps."),
                    (5, "Fully addresses it", "Every part of the question is addressed correctly and directly."),
                ),
            },
        },
        {
            "key": "completeness",
            "label": "Completeness",
            "description": "includes all necessary information from the retrieved context",
            "scale": {
                "type": "points",
                "points": _points(
                    (1, "Almost nothing", "Almost none of the necessary information from the context is included."),
                    (2, "Little", "Some necessary information is included; most is missing."),
                    (3, "About half", "About half of the necessary information is included."),
                    (4, "Nearly all", "Most necessary information is included; a minor point is missing."),
                    (5, "All", "All necessary information from the retrieved context is included."),
                ),
            },
        },
        {
            "key": "faithfulness",
            "label": "Faithfulness",
            "description": "remains grounded in the source content without hallucinations",
            "level": "nominal",
            "scale": {
                "type": "points",
                "points": _points(
                    (0, "Not faithful", "Something in the answer is not grounded in the source content."),
                    (1, "Faithful", "Everything in the answer is grounded in the source content."),
                ),
            },
        },
    ],
}

# VinQA's per-cited-image G-Eval rubrics (vinqa-rubrics.md §2, Figs. 19-21), verbatim.
VINQA_CITED_IMAGES: dict[str, Any] = {
    "name": "VinQA: per-cited-image rubric (G-Eval)",
    "version": 1,
    "unit": "candidate",
    "repeat": "cited_images",
    "instructions": (
        "Rate every image the answer cites ([chart_1], [table_2], [figure_3]). Each cited image is shown before "
        "the paragraph that cites it, with its ground-truth description and the text around it in its source "
        "document. If the answer cites no image there is nothing to rate: submit it as it is (recorded as "
        "no_cited_images)."
    ),
    "context": {"paper": 1, "question": 1, "answers": 1, "figure": 1, "caption": 1},
    "criteria": [
        {
            "key": "img_effectiveness",
            "label": "Effectiveness",
            "description": (
                "how well the cited image and its accompanying description contribute to the answer. Evaluate "
                "whether the description corresponding to the cited tag in the response is relevant to what the "
                "question asks and whether it sufficiently helps explain the answer."
            ),
            "scale": {
                "type": "points",
                "points": _points(
                    (
                        1,
                        "Harmful",
                        "The selected image in the answer are harmful to answering the query, such as causing "
                        "serious misunderstanding for the reader.",
                    ),
                    (
                        2,
                        "Irrelevant",
                        "The selected image in the answer are mostly unrelated to the query and the answer, with "
                        "little to no connection overall.",
                    ),
                    (
                        3,
                        "Partially Effective",
                        "The selected image in the answer are somewhat effective in helping the reader understand "
                        "the answer to the query.",
                    ),
                    (
                        4,
                        "Mostly Effective",
                        "The selected image in the answer are largely consistent with the answer to the query and "
                        "effectively help the reader better understand the answer.",
                    ),
                    (
                        5,
                        "Highly Effective",
                        "The selected image in the answer provide crucial details for answering the query. They "
                        "not only align with the answer but also offer highly effective supplementary information "
                        "that aids in understanding the query-answer pair from a multimodal perspective.",
                    ),
                ),
            },
        },
        {
            "key": "img_position",
            "label": "Position",
            "description": (
                "how appropriately the image is placed within the context of the answer. Evaluate whether the "
                "cited tags in the response are appropriately placed so that their corresponding descriptions "
                "align with the surrounding context without contradiction."
            ),
            "level": "nominal",
            "scale": {
                "type": "points",
                "points": _points(
                    (
                        0,
                        "Inappropriate Position",
                        "The image is irrelevant to both the preceding and following context, or the position of "
                        "the image does not enhance content understanding or visual appeal. The insertion of the "
                        "image does not align with the logical progression of the text and fails to improve the "
                        "reading experience or information transmission.",
                    ),
                    (
                        1,
                        "Appropriate Position",
                        "The image is contextually relevant to at least one of the surrounding contexts (preceding "
                        "or following), and it enhances content understanding or visual effect. The position of "
                        "the image aligns with the logical flow of the text and is inserted appropriately, "
                        "improving the overall information delivery. If the description of the image is detailed, "
                        "it further clarifies the connection between the image and the text, enhancing the overall "
                        "expressive effect.",
                    ),
                ),
            },
        },
        {
            "key": "img_expression",
            "label": "Expression",
            "description": (
                "how faithfully the accompanying textual description reflects the visual content. Compare the "
                "descriptions of the cited tags in the response with the previously provided ground truth "
                "descriptions and evaluate whether there are any inaccuracies."
            ),
            "level": "nominal",
            "scale": {
                "type": "points",
                "points": _points(
                    (
                        0,
                        "Inappropriate Expression",
                        "The description of the image in the response does not match the actual content of the image.",
                    ),
                    (
                        1,
                        "Appropriate Expression",
                        "The description of the image in the response matches the actual content of the image.",
                    ),
                ),
            },
        },
    ],
}

# Pairwise preference, with SciDQA's four outcomes (scidqa.md §10).
PAIRWISE_PREFERENCE: dict[str, Any] = {
    "name": "Pairwise preference (A, B, tie, neither acceptable)",
    "version": 1,
    "unit": "pair",
    "instructions": (
        "Two answers to the same question. Compare them on comprehensiveness, factuality and clarity, as in "
        "SciDQA's comparison of human and GPT-4 answers. The two answers are shown in a random order, the same "
        "for everyone who rates this item; which one was A and which B is recorded with your choice."
    ),
    "context": {"paper": 1, "question": 1, "answers": 1},
    "criteria": [
        {
            "key": "preference",
            "label": "Which answer is better?",
            "description": "Judge comprehensiveness, factuality and clarity.",
            "scale": {
                "type": "choices",
                "choices": [
                    {"value": "A", "label": "Answer A", "description": "A is the better answer."},
                    {"value": "B", "label": "Answer B", "description": "B is the better answer."},
                    {"value": "tie", "label": "Tie", "description": "Both are equally good."},
                    {"value": "neither", "label": "Neither acceptable", "description": "Neither answer is acceptable."},
                ],
            },
        }
    ],
}

# SPIQA's crowd pilot, Fig. G.4 (spiqa.md §3): the caption is revealed only at Task-2.
SPIQA_FIGURE_CHECK: dict[str, Any] = {
    "name": "SPIQA: two-stage figure check",
    "version": 1,
    "unit": "item",
    "instructions": "In this task, you will answer two distinct questions for the question and image presented below:",
    "stages": [{"title": "Task-1: Image-only"}, {"title": "Task-2: Image+caption"}],
    "context": {"paper": 1, "question": 1, "figure": 1, "caption": 2},
    "criteria": [
        {
            "key": "image_helps",
            "label": "Does the image have information to help answer the question?",
            "stage": 1,
            "scale": {"type": "choices", "choices": YES_NO},
        },
        {
            "key": "guess_image_only",
            "label": "Can you try to guess the answer, otherwise explain why or why not",
            "stage": 1,
            "scale": {"type": "text", "max_length": 2000},
        },
        {
            "key": "image_caption_helps",
            "label": "Does the image along with the caption, now have information to help answer the question?",
            "stage": 2,
            "scale": {"type": "choices", "choices": YES_NO},
        },
        {
            "key": "guess_with_caption",
            "label": "(optional) Do you want to guess the answer now or share any new explanation?",
            "stage": 2,
            "required": False,
            "scale": {"type": "text", "max_length": 2000},
        },
    ],
}

# SPIQA §4: "whether each question was generated by a human, machine or if they're unsure".
SPIQA_AUTHORSHIP: dict[str, Any] = {
    "name": "SPIQA: written by a human, a model, or unsure",
    "version": 1,
    "unit": "item",
    "instructions": (
        "Some questions were written by people and some were generated by a model. Say whether this question was "
        "generated by a human, machine or if you're unsure."
    ),
    "context": {"paper": 1, "question": 1},
    "criteria": [
        {
            "key": "question_author",
            "label": "Who wrote this question?",
            "scale": {
                "type": "choices",
                "choices": [
                    {"value": "human", "label": "A human", "description": "Written by a person."},
                    {"value": "machine", "label": "A model (machine)", "description": "Generated by a model."},
                    {"value": "unsure", "label": "Unsure", "description": "You cannot tell."},
                ],
            },
        }
    ],
}

PRESETS: dict[str, Preset] = {
    "scidqa_aspects": Preset("SciDQA: relevance, accuracy, completeness, conciseness (1-10)", SCIDQA_ASPECTS),
    "vinqa_answer": Preset("VinQA: relevancy, completeness (1-5), faithfulness (0/1)", VINQA_ANSWER),
    "vinqa_cited_images": Preset(
        "VinQA: each cited image's effectiveness (1-5), position and expression (0/1)", VINQA_CITED_IMAGES
    ),
    "pairwise_preference": Preset("Pairwise preference: A, B, tie, neither acceptable", PAIRWISE_PREFERENCE),
    "spiqa_figure_check": Preset("SPIQA: two-stage figure check (image, then caption)", SPIQA_FIGURE_CHECK),
    "spiqa_authorship": Preset("SPIQA: written by a human, a model, or unsure", SPIQA_AUTHORSHIP),
}
