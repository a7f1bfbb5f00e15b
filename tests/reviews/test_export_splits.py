"""The seeded split rule: groups (papers) never divided, deterministic, close to the ratios."""

from __future__ import annotations

import random
from collections import Counter

import pytest

from reviews.exports.splits import (
    SplitRuleInvalid,
    assign_groups,
    checked_ratios,
    item_group,
    paper_group,
    parse_ratios,
)

RATIOS = (("train", 0.8), ("dev", 0.1), ("test", 0.1))


def uneven_groups(count: int = 400, seed: int = 7) -> list[tuple[str, int]]:
    """Papers with 1 to 40 questions, as real datasets have."""
    draw = random.Random(seed)
    return [(paper_group("spiqa", f"2101.{n:05d}v1"), draw.randint(1, 40)) for n in range(count)]


def items_per_split(groups: list[tuple[str, int]], assigned: dict[str, str]) -> Counter[str]:
    counts: Counter[str] = Counter()
    for key, size in groups:
        counts[assigned[key]] += size
    return counts


def test_every_group_gets_exactly_one_split_of_the_ratios() -> None:
    groups = uneven_groups()

    assigned = assign_groups(groups, RATIOS, seed=1)

    assert set(assigned) == {key for key, _ in groups}
    assert set(assigned.values()) == {"train", "dev", "test"}


def test_the_same_seed_gives_the_same_splits_whatever_order_the_groups_come_in() -> None:
    groups = uneven_groups()
    shuffled = list(groups)
    random.Random(3).shuffle(shuffled)

    assert assign_groups(groups, RATIOS, seed=11) == assign_groups(shuffled, RATIOS, seed=11)


def test_another_seed_gives_other_splits() -> None:
    groups = uneven_groups()

    assert assign_groups(groups, RATIOS, seed=1) != assign_groups(groups, RATIOS, seed=2)


def test_split_sizes_stay_within_one_group_of_the_ratios_in_items() -> None:
    groups = uneven_groups()
    total = sum(size for _, size in groups)
    largest = max(size for _, size in groups)

    counts = items_per_split(groups, assign_groups(groups, RATIOS, seed=5))

    for name, share in RATIOS:
        assert abs(counts[name] - share * total) <= largest, (name, counts)


def test_a_lone_group_goes_to_the_largest_split() -> None:
    assert assign_groups([(paper_group("d", "p"), 12)], RATIOS, seed=0) == {paper_group("d", "p"): "train"}


def test_items_without_a_paper_are_groups_of_their_own() -> None:
    assert item_group("d", "test", "q1") != item_group("d", "test", "q2")
    assert item_group("d", "test", "q1") != paper_group("d", "q1")


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("train=0.8, dev=0.1, test=0.1", (("train", 0.8), ("dev", 0.1), ("test", 0.1))),
        ("train=8,test=2", (("train", 0.8), ("test", 0.2))),
        ("all=1", (("all", 1.0),)),
    ],
)
def test_ratios_are_read_and_normalised(text: str, expected: tuple[tuple[str, float], ...]) -> None:
    assert parse_ratios(text) == expected


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("", "at least one split"),
        ("train", "not NAME=SHARE"),
        ("train=lots", "not a number"),
        ("train=0.5, train=0.5", "named twice"),
        ("train=0.5, test=0", "positive number"),
        ("train=1, test=-1", "positive number"),
        ("train=nan", "positive number"),
        ("../train=1", "split name"),
    ],
)
def test_bad_ratios_are_refused_with_the_reason(text: str, message: str) -> None:
    with pytest.raises(SplitRuleInvalid, match=message):
        parse_ratios(text)


def test_checked_ratios_refuses_an_empty_list() -> None:
    with pytest.raises(SplitRuleInvalid):
        checked_ratios([])
