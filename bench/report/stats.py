"""The statistics behind every delta: medians, spread, and benchstat's significance rule.

A delta is reported only when a two-sided Mann-Whitney U test over the repetitions says the two
samples differ (p < ALPHA); otherwise it prints as "~", as benchstat does. The test is
scipy.stats.mannwhitneyu; it needs at least MIN_SAMPLES repetitions on each side. Timings are
all distinct, so scipy uses the exact distribution, whose smallest p is 2/C(2n, n): 0.1 for 3+3
samples, so at least 4 repetitions are needed to call a time delta (4+4 reach 2/70 = 0.029,
5+5 reach 0.008). Counters that are the same in every repetition (allocs/op) are ties, tested
with the normal approximation.
"""

from __future__ import annotations

import dataclasses
import math

import numpy
from scipy import stats as scipy_stats

ALPHA = 0.05
MIN_SAMPLES = 3


@dataclasses.dataclass(frozen=True)
class Summary:
    n: int
    median: float
    spread: float  # half the interquartile range, as a fraction of the median (0 when n < 2)


@dataclasses.dataclass(frozen=True)
class Delta:
    change: float | None  # (new - old) / old; None when old is 0 and new is not
    p: float | None       # None when either side has fewer than MIN_SAMPLES samples
    n_old: int
    n_new: int

    @property
    def significant(self) -> bool:
        return self.p is not None and self.p < ALPHA


def summarize(samples: list[float]) -> Summary | None:
    if not samples:
        return None
    median = float(numpy.median(samples))
    spread = 0.0
    if len(samples) > 1 and median != 0:
        spread = float(scipy_stats.iqr(samples)) / 2 / abs(median)
    return Summary(n=len(samples), median=median, spread=spread)


def relative_change(old: float, new: float) -> float | None:
    if old == 0:
        return 0.0 if new == 0 else None
    return (new - old) / old


def u_test(old: list[float], new: list[float]) -> float | None:
    """Two-sided Mann-Whitney U p-value, or None when there are too few samples to test."""
    if len(old) < MIN_SAMPLES or len(new) < MIN_SAMPLES:
        return None
    if len(set(old) | set(new)) == 1:
        return 1.0  # every sample equal (e.g. 0 allocs/op on both sides): nothing differs
    p = float(scipy_stats.mannwhitneyu(old, new, alternative="two-sided").pvalue)
    return 1.0 if math.isnan(p) else p


def compare(old: list[float], new: list[float]) -> Delta | None:
    """The delta of new against old (medians) and its p-value; None when a side is empty."""
    if not old or not new:
        return None
    change = relative_change(float(numpy.median(old)), float(numpy.median(new)))
    return Delta(change=change, p=u_test(old, new), n_old=len(old), n_new=len(new))


def ratio(value: float | None, reference: float | None) -> float | None:
    if value is None or reference is None or reference == 0:
        return None
    return value / reference
