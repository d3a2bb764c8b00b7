"""The §7.1 metrics: counts with their denominators, null (never 0.0) where there is nothing to count."""

from __future__ import annotations

import random

from hypothesis import given, settings
from hypothesis import strategies as st

from pinakes.extract import quality
from pinakes.extract.quality import Ratio


def dp_lcs(first: list[str], second: list[str]) -> int:
    previous = [0] * (len(second) + 1)
    for item in first:
        current = [0]
        for index, other in enumerate(second):
            current.append(previous[index] + 1 if item == other else max(previous[index + 1], current[index]))
        previous = current
    return previous[-1]


@settings(max_examples=200, deadline=None)
@given(st.lists(st.sampled_from("abcd"), max_size=40), st.lists(st.sampled_from("abcd"), max_size=40))
def test_bit_parallel_lcs_matches_dynamic_programming(first: list[str], second: list[str]) -> None:
    assert quality.lcs_length(first, second) == dp_lcs(first, second)


def test_lcs_is_fast_on_long_sequences() -> None:
    rng = random.Random(3)
    words = [rng.choice("abcdefgh") for _ in range(20_000)]
    assert quality.lcs_length(words, words) == 20_000


def test_char_recall_ignores_whitespace_and_counts_in_order() -> None:
    assert quality.char_recall("ab cd", "a b\ncd") == Ratio(4, 4)
    assert quality.char_recall("abcd", "dcba") == Ratio(1, 4)
    assert quality.char_recall("", "anything").value is None


def test_order_fidelity_sees_columns_read_across() -> None:
    truth = "one two three four five six"
    assert quality.order_fidelity(truth, "one two three four five six").value == 1.0
    assert quality.order_fidelity(truth, "four five six one two three") == Ratio(3, 6)


def test_junk_rate_counts_repeats_beyond_the_truth() -> None:
    truth = "Chapter one begins here"
    extracted = "Chapter 12 Chapter one begins here"
    assert quality.junk_rate(truth, extracted) == Ratio(2, 6)  # "12" and the second "chapter"
    assert quality.junk_rate(truth, "").value is None


def test_pair_adjacency_uses_the_window() -> None:
    pairs = [("Height", "31 cm"), ("Width", "22 cm")]
    assert quality.pair_adjacency("Height 31 cm\nWidth 22 cm", pairs) == Ratio(2, 2)
    far = "Height Width " + "x " * 60 + "31 cm 22 cm"
    assert quality.pair_adjacency(far, pairs) == Ratio(0, 2)
    assert quality.pair_adjacency("anything", []).value is None


def test_word_coverage_is_null_without_a_native_layer() -> None:
    assert quality.word_coverage("", "").value is None
    assert quality.word_coverage("archive ledger of it", "the archive") == Ratio(1, 2)


def test_token_bag_recall_and_precision() -> None:
    recall, precision = quality.token_bag("a b b c", "b c c d")
    assert (recall, precision) == (Ratio(2, 4), Ratio(2, 4))


def test_a_ratio_reports_its_counts() -> None:
    assert Ratio(1, 3).to_dict() == {"numerator": 1, "denominator": 3, "value": 0.3333}
    assert Ratio(0, 0).to_dict()["value"] is None
    assert Ratio(1, 2) + Ratio(0, 0) == Ratio(1, 2)
