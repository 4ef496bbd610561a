"""The statistics behind every delta: medians, spread, and benchstat's significance rule.

A delta is reported only when a two-sided Mann-Whitney U test over the repetitions says the two
samples differ (p < ALPHA); otherwise it prints as "~", as benchstat does. The test is
scipy.stats.mannwhitneyu; it needs at least MIN_SAMPLES repetitions on each side. Timings are
all distinct, so scipy uses the exact distribution, whose smallest p is 2/C(2n, n): 0.1 for 3+3
samples, so at least 4 repetitions are needed to call a time delta (4+4 reach 2/70 = 0.029,
5+5 reach 0.008). With ties (a counter the same in every repetition, such as peak held)
scipy falls back to the normal approximation, which at a few samples a side reports p-values
far below what any split of them can give (3 equal values a side against 3 others: 0.047,
where no test of 3+3 goes below 0.1); up to EXACT_MAX samples a side, u_test counts the splits
itself. A row's allocs/op and B/op come from one counting process (results.COUNTED): one value
a side, compared by value (compare_counted), never tested.
"""

from __future__ import annotations

import dataclasses
import itertools
import math

import numpy
from scipy import stats as scipy_stats

ALPHA = 0.05
MIN_SAMPLES = 3
# The most samples a side for which u_test enumerates every split of tied samples: C(16, 8) =
# 12,870 splits, a few milliseconds.
EXACT_MAX = 8


@dataclasses.dataclass(frozen=True)
class Summary:
    n: int
    median: float
    spread: float  # half the interquartile range, as a fraction of the median (0 when n < 2)


@dataclasses.dataclass(frozen=True)
class Delta:
    change: float | None  # (new - old) / old; None when old is 0 and new is not
    p: float | None       # None when either side has fewer than MIN_SAMPLES samples, or counted
    n_old: int
    n_new: int
    # Each side is one count from one counting process (compare_counted): a change, untested.
    counted: bool = False
    # Which way the U test's statistic leans: NEW's samples rank above OLD's (larger) on the
    # whole. It, not the medians' change, names the direction of a difference the test found:
    # in a skewed pair of samples the medians can move the other way (None: untested).
    new_larger: bool | None = None

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
        return 1.0  # every sample equal (e.g. the same peak held on both sides): nothing differs
    pooled = list(old) + list(new)
    if len(set(pooled)) < len(pooled) and max(len(old), len(new)) <= EXACT_MAX:
        return _exact_tied_p(old, new)
    p = float(scipy_stats.mannwhitneyu(old, new, alternative="two-sided").pvalue)
    return 1.0 if math.isnan(p) else p


def _exact_tied_p(old: list[float], new: list[float]) -> float:
    """The two-sided U test's p-value with ties, from every split of the pooled samples into
    groups of the sides' sizes: twice the smaller share of splits whose rank sum (midranks) is
    at most, or at least, the observed one, as scipy's exact test and permutation_test have it."""
    # Midranks are multiples of a half: doubled, the sums compare exactly as integers.
    doubled = [int(round(2 * r)) for r in scipy_stats.rankdata(list(old) + list(new))]
    observed = sum(doubled[:len(old)])
    splits = at_most = at_least = 0
    for chosen in itertools.combinations(doubled, len(old)):
        total = sum(chosen)
        splits += 1
        at_most += total <= observed
        at_least += total >= observed
    return min(1.0, 2 * min(at_most, at_least) / splits)


def compare(old: list[float], new: list[float]) -> Delta | None:
    """The delta of new against old (medians) and its p-value; None when a side is empty."""
    if not old or not new:
        return None
    change = relative_change(float(numpy.median(old)), float(numpy.median(new)))
    p = u_test(old, new)
    return Delta(change=change, p=p, n_old=len(old), n_new=len(new),
                 new_larger=None if p is None else ranks_above(new, old))


def ranks_above(new: list[float], old: list[float]) -> bool:
    """Whether `new`'s samples rank above `old`'s on the whole: their rank sum in the pooled
    samples (midranks) exceeds its expectation, the direction the U test's statistic leans."""
    ranks = scipy_stats.rankdata(list(old) + list(new))
    expected = len(new) * (len(old) + len(new) + 1) / 2
    return float(sum(ranks[len(old):])) > expected


def compare_counted(old: list[float], new: list[float]) -> Delta | None:
    """The change of a counted metric (results.COUNTED): each side one value from one counting
    process, so there is no spread to test against and no p-value; None when a side is empty."""
    if not old or not new:
        return None
    change = relative_change(float(numpy.median(old)), float(numpy.median(new)))
    return Delta(change=change, p=None, n_old=len(old), n_new=len(new), counted=True)


@dataclasses.dataclass(frozen=True)
class PairedRatio:
    """A row's time over another's, round by round: both rows ran once in each round of an
    interleaved run, close together in time, so a burst of load on a shared machine that slows
    one round moves both sides of that round's ratio, and the median of the ratios shows what
    the medians of the two rows, taken apart, can hide."""
    median: float  # median over the paired rounds of the row's time / the other's
    rounds: int    # rounds paired; 0 when the rounds are unknown: the ratio of the medians
    faster: int    # paired rounds in which the row took less time than the other
    # Two-sided Wilcoxon signed-rank test of the rounds' ratios against 1 (signed_rank_p);
    # None when it cannot call a difference: rounds unknown, or fewer than MIN_PAIRED_ROUNDS.
    p: float | None = None
    # Which way the test's statistic leans: the rank sum of the rounds in which the row took
    # longer against that of the rounds in which it took less (signed_rank). It, not the
    # median, names the direction of a difference the test found: in a skewed run (many rounds
    # a little faster, fewer much slower) the median sits on the other side of 1.
    leans_slower: bool | None = None

    @property
    def call(self) -> str:
        """"faster" or "slower" when the test tells the row from the other (p < ALPHA), "~"
        when it does not, "" when it cannot (too few rounds, or rounds unknown)."""
        if self.p is None:
            return ""
        if self.p >= ALPHA:
            return "~"
        slower = self.median > 1 if self.leans_slower is None else self.leans_slower
        return "slower" if slower else "faster"


# The fewest paired rounds with which the signed-rank test can reach p < ALPHA: its smallest
# two-sided p, every round on one side, is 2 / 2^n (0.0625 at 5 rounds, 0.031 at 6).
MIN_PAIRED_ROUNDS = next(n for n in range(1, 64) if 2.0 / 2 ** n < ALPHA)


def sign_test_p(below: int, above: int) -> float:
    """Two-sided exact sign test: `below` of `below + above` rounds on one side, even odds."""
    n = below + above
    if n == 0:
        return 1.0
    return float(scipy_stats.binomtest(min(below, above), n, 0.5).pvalue)


def signed_rank_p(ratios: list[float]) -> float | None:
    """Whether a row's time differs from another's, round by round: the two-sided Wilcoxon
    signed-rank test of the rounds' log ratios against 0. Paired, so a burst that slows both
    rows of a round cancels, and it weighs how far each round leans, not only which way. The
    p-value is exact, ties included (midranks; rounds with equal times drop out, as Wilcoxon's
    own rule has it). None with fewer than MIN_PAIRED_ROUNDS rounds."""
    tested = signed_rank(ratios)
    return None if tested is None else tested[0]


def signed_rank(ratios: list[float]) -> tuple[float, bool] | None:
    """signed_rank_p's p-value, and whether the statistic leans towards the row being the
    slower (the ranks of the rounds with a ratio above 1 sum to more than half the total)."""
    if len(ratios) < MIN_PAIRED_ROUNDS:
        return None
    logs = [x for x in numpy.log(ratios) if x != 0]
    if not logs:
        return 1.0, False  # every round the same time on both sides
    # Midranks are multiples of a half: doubled, the statistic's null distribution (each rank
    # positive or negative with even odds) counts over integers.
    weights = [int(round(2 * r)) for r in scipy_stats.rankdata(numpy.abs(logs))]
    positive = sum(w for w, x in zip(weights, logs) if x > 0)
    ways = [1] + [0] * sum(weights)
    for w in weights:
        for total in range(len(ways) - 1, w - 1, -1):
            ways[total] += ways[total - w]
    outcomes = 2 ** len(logs)
    at_most = sum(ways[:positive + 1]) / outcomes
    at_least = sum(ways[positive:]) / outcomes
    return min(1.0, 2 * min(at_most, at_least)), 2 * positive > sum(weights)


def paired_ratio(values: list[float], rounds: list[int | None], other: list[float],
                 other_rounds: list[int | None]) -> PairedRatio | None:
    """values[i] (in round rounds[i]) over the other row's sample of the same round, for every
    round both rows have; the ratio of the medians when a side's rounds are unknown or repeat
    (results merged from several runs); None when a side has no sample or a zero median."""
    if not values or not other:
        return None

    def by_round(samples: list[float], numbers: list[int | None]) -> dict[int, float] | None:
        if len(numbers) != len(samples) or None in numbers or len(set(numbers)) != len(numbers):
            return None
        return dict(zip(numbers, samples))
    mine, theirs = by_round(values, rounds), by_round(other, other_rounds)
    common = sorted(set(mine) & set(theirs)) if mine is not None and theirs is not None else []
    if common and all(theirs[r] > 0 for r in common):
        ratios = [mine[r] / theirs[r] for r in common]
        tested = signed_rank(ratios)
        return PairedRatio(median=float(numpy.median(ratios)), rounds=len(common),
                           faster=sum(x < 1 for x in ratios),
                           p=None if tested is None else tested[0],
                           leans_slower=None if tested is None else tested[1])
    unpaired = ratio(float(numpy.median(values)), float(numpy.median(other)))
    return None if unpaired is None else PairedRatio(median=unpaired, rounds=0, faster=0)


def ratio(value: float | None, reference: float | None) -> float | None:
    if value is None or reference is None or reference == 0:
        return None
    return value / reference
