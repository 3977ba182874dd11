"""The benchmark's paired figures: kinds take turns in alternating order, and a C figure
is the median of the rounds' ratios with an interval that widens with their spread."""

from __future__ import annotations

import pytest

from bench.paired import describe, median_ratio, turn_order


def test_the_kind_that_ran_last_runs_first_in_the_next_round() -> None:
    kinds = ["floor", "ours", "quiet"]
    assert [turn_order(kinds, r) for r in range(3)] == [kinds, kinds[::-1], kinds]


def test_the_median_of_ratios_and_an_interval_that_holds_it() -> None:
    steady = median_ratio([1.05] * 9)
    assert steady == (1.05, 1.05, 1.05)
    spread = [0.8, 0.9, 1.0, 1.1, 1.2, 1.3, 0.95, 1.05, 1.15]
    middle, low, high = median_ratio(spread)
    assert middle == 1.05 and low < middle < high
    assert min(spread) <= low and high <= max(spread)
    assert median_ratio(spread) == (middle, low, high)  # the same rounds, the same interval
    with pytest.raises(ValueError, match="no rounds"):
        median_ratio([])


def test_the_line_counts_the_rounds_that_met_the_target() -> None:
    ratios = [0.9, 1.0, 1.1, 1.2]
    assert "3 of 4 rounds at or above 1.00x" in describe("throughput", ratios, "higher")
    assert "2 of 4 rounds at or below 1.00x" in describe("worker CPU", ratios, "lower")
