"""Figures from rounds in which the kinds take turns: each round's ratio to the floor,
their median, and how far that median can be trusted.

A shared machine's speed drifts by a fifth over minutes, so the ratio of two medians
(each kind's rounds taken apart) mixes the drift into the comparison; a round's ratio
compares two kinds that ran a minute apart. The interval is a percentile bootstrap of
the median (resampling the rounds), which assumes nothing about how ratios spread.
"""

from __future__ import annotations

import random
import statistics
from collections.abc import Sequence

#: Resamples for the interval: enough that its ends move by less than the last digit.
RESAMPLES = 10_000


def turn_order(kinds: Sequence[str], round_index: int) -> list[str]:
    """The kinds in turn, reversed every other round: whichever ran last in one round
    runs first in the next, so a drift within a round counts against neither."""
    return list(kinds) if round_index % 2 == 0 else list(reversed(kinds))


def median_ratio(ratios: Sequence[float], seed: int = 0) -> tuple[float, float, float]:
    """The median of per-round ratios and its 95% bootstrap interval (low, high)."""
    if not ratios:
        raise ValueError("no rounds to compare")
    rng = random.Random(seed)  # the same rounds print the same interval
    medians = sorted(
        statistics.median(rng.choices(ratios, k=len(ratios))) for _ in range(RESAMPLES)
    )
    low, high = medians[int(RESAMPLES * 0.025)], medians[int(RESAMPLES * 0.975) - 1]
    return statistics.median(ratios), low, high


def describe(name: str, ratios: Sequence[float], better: str) -> str:
    """One line: the median ratio, its interval, and how many rounds were ``better``
    (``"higher"``: at or above 1.0x; ``"lower"``: at or below)."""
    middle, low, high = median_ratio(ratios)
    met = sum(1 for r in ratios if (r >= 1.0 if better == "higher" else r <= 1.0))
    return (
        f"{name} {middle:.2f}x (95% interval {low:.2f}x to {high:.2f}x; "
        f"{met} of {len(ratios)} rounds at or {'above' if better == 'higher' else 'below'} 1.00x)"
    )
