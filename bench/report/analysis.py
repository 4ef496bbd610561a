"""Turns results into comparison tables: which row is compared with which, and the verdict.

One table per workload (and thread count). In a run, every row is compared with the baseline
row of its table — ``new_delete/fresh`` for workloads, ``new_delete`` for the Alloc* patterns —
and timed against the reference row: ``limit`` (the workload with no allocation at all) or,
for the patterns, ``bare_list``. Where the table has ``mimalloc_plain`` rows (the rival, mimalloc
at its fastest path), every other row's time is also held against the rival's row of the same
variant (its fresh row for a variant it lacks), round by round (stats.paired_ratio). In a
comparison of two runs, every row of NEW is compared with the same row of OLD, and the rival
ratio is given for both. rival_judged_rows() and rival_tally() pick and count the rows whose
rounds the signed-rank test tells from the rival's (stats.signed_rank_p).

The verdict (verdict()) names the fastest and the leanest (peak held) strategy row only when
the U test separates it from the others, else the tied group (Pick); leaves the debugging
strategy ``checked`` and the bench-only wrappers out; flags a reference row noisier than the
rows it judges; and finds the rows no other row beats in both time and peak held (the Pareto
front the memory chart marks).
"""

from __future__ import annotations

import dataclasses

import numpy

import metrics as m
import results
import stats


@dataclasses.dataclass
class AnalyzedRow:
    key: results.RowKey
    role: str  # "baseline", "strategy", "preload", "plain" (bench-only wrapper) or "reference"
    summary: dict[str, stats.Summary | None]        # this row (NEW when comparing)
    old: dict[str, stats.Summary | None] | None     # OLD's same row when comparing
    delta: dict[str, stats.Delta | None]
    vs_reference: float | None                      # time/op divided by the reference's
    vs_rival: stats.PairedRatio | None = None       # time/op against the rival's, by round
    old_vs_rival: stats.PairedRatio | None = None   # the same in OLD, when comparing
    samples: dict[str, list[float]] = dataclasses.field(default_factory=dict)
    held_method: str = ""                           # how peak held was measured
    phases: list[str] = dataclasses.field(default_factory=list)

    @property
    def label(self) -> str:
        return self.key.label

    def median(self, metric: str) -> float | None:
        s = self.summary.get(metric)
        return s.median if s else None

    def values(self, metric: str) -> list[float]:
        return self.samples.get(metric, [])

    def against_rival(self, old: bool = False) -> stats.PairedRatio | None:
        """The row's ratio to the rival: NEW's (or a run's), or OLD's when comparing."""
        return self.old_vs_rival if old else self.vs_rival


@dataclasses.dataclass
class Pick:
    """The best rows by one metric (lower is better): one winner, or the rows tied for it.

    rows[0] has the lowest median. Another row is tied with it when their medians are within
    the metric's tolerance, or when the U test over their repetitions finds no difference
    (p >= ALPHA, or too few runs to test) — unless both rows measured the same value in every
    run (a counter such as an upstream's peak held), which needs no test. A counted metric
    (results.COUNTED: B/op) is one value per row, from one counting process: rows outside the
    tolerance differ, untested. A single row is named only when every other row differs from
    it, and so from the runner-up (the next lowest median)."""
    metric: str
    rows: list[AnalyzedRow]
    runner_up: AnalyzedRow | None
    p: float | None  # the U test of rows[0] against the runner-up; None: too few runs, or alone
    exact: bool = False  # rows[0] and the runner-up measured one value each, in every run
    counted: bool = False  # the metric is counted once per row (results.COUNTED): never tested

    @property
    def leader(self) -> AnalyzedRow:
        return self.rows[0]

    @property
    def winner(self) -> AnalyzedRow | None:
        return self.rows[0] if len(self.rows) == 1 else None


@dataclasses.dataclass
class NoisyReference:
    """The reference row's spread against the median spread of the rows it judges."""
    reference_spread: float
    rows_spread: float


@dataclasses.dataclass
class Verdict:
    fastest: Pick | None
    leanest: Pick | None        # by peak held (None when the bench did not report it)
    fewest_bytes: Pick | None   # by heap B/op
    best_preload: Pick | None
    reference: AnalyzedRow | None
    excluded: list[AnalyzedRow]  # rows of a strategy left out of every verdict (see below)
    noisy_reference: NoisyReference | None
    pareto: list[AnalyzedRow]   # no other row is both faster and holds less


@dataclasses.dataclass
class Table:
    workload: str
    threads: int
    metrics: list[m.Metric]
    rows: list[AnalyzedRow]
    baseline: str | None    # label of the baseline row, or None (compare mode, or missing)
    reference: str | None   # label of the reference row, or None
    comparing: bool         # True: deltas are NEW vs OLD
    rival: str | None = None  # the rival's strategy when the table has its rows (vs_rival)
    interleaved: bool = False  # the rows' repetitions ran interleaved, in random order
    heap_state: str = ""    # the heap state of the rows' figures (results.WARM, IDLE), "" unknown

    @property
    def title(self) -> str:
        return self.workload + (f" threads:{self.threads}" if self.threads != 1 else "")

    @property
    def is_pattern(self) -> bool:
        return all(r.key.is_pattern or r.key.is_reference for r in self.rows)

    @property
    def phases(self) -> list[str]:
        """The phases the rows report (AllocPhases), in order."""
        seen: dict[str, None] = {}
        for row in self.rows:
            for phase in row.phases:
                seen.setdefault(phase, None)
        return list(seen)

    def repetitions(self, old: bool = False) -> tuple[int, int]:
        """The fewest and most runs of a row (OLD's rows' when `old`); (0, 0) for none."""
        ns = [s.n for r in self.rows for s in [((r.old if old else r.summary) or {})
                                                .get("ns_per_op")] if s]
        return (min(ns), max(ns)) if ns else (0, 0)


def _role(key: results.RowKey) -> str:
    if key.is_reference:
        return "reference"
    if key.is_plain_wrapper:
        return "plain"
    if key.preload:
        return "preload"
    if key.strategy == results.BASELINE_STRATEGY and key.variant in ("", results.BASELINE_VARIANT):
        return "baseline"
    return "strategy"


# Byte figures this close count as equally lean (amortised pool refills make "0" read 0.0003;
# a resident-set figure moves by pages).
LEAN_TOLERANCE_BYTES = 1.0
LEAN_TOLERANCE_FRACTION = 0.01

# Strategies that never enter a verdict or the Pareto front, with the reason the report gives:
# a user would not pick them for speed or memory, whatever one noisy run says.
EXCLUDED_FROM_VERDICTS = {"checked": "a debugging strategy"}

# A reference row is called noisy when its spread (half the IQR over the median) is above
# both this floor and NOISY_REFERENCE_FACTOR times the median spread of the rows it judges:
# its "vs" ratios then move with the noise rather than with the rows.
NOISY_REFERENCE_FLOOR = 0.05
NOISY_REFERENCE_FACTOR = 2.0

# In the context of a run whose rows' repetitions ran interleaved (runner.schedule).
INTERLEAVED_FIELD = "pmrkit_interleaved"

_ROLE_ORDER = {"baseline": 0, "strategy": 1, "preload": 2, "plain": 3, "reference": 4}
_VARIANT_ORDER = {"fresh": 0, "pooled": 1, "shared": 2}


def _ordered(rows: list[results.Row], strategy_order: list[str]) -> list[results.Row]:
    """Baseline, strategies (in the binary's order, fresh before pooled), preloads, reference."""
    rank = {s: i for i, s in enumerate(strategy_order)}
    preload_rank: dict[str, int] = {}
    for row in rows:
        preload_rank.setdefault(row.key.preload, len(preload_rank))

    def key(row: results.Row):
        k = row.key
        return (_ROLE_ORDER[_role(k)], preload_rank[k.preload], rank.get(k.strategy, len(rank)),
                k.strategy, _VARIANT_ORDER.get(k.variant, len(_VARIANT_ORDER)))
    return sorted(rows, key=key)


def _metrics_present(rows) -> list[m.Metric]:
    present = [metric for metric in m.TABLE_METRICS
               if metric not in m.OPTIONAL_METRICS or any(r.values(metric.key) for r in rows)]
    return present


def _summaries(row: results.Row | None) -> dict[str, stats.Summary | None]:
    if row is None:
        return {}
    keys = list(results.METRICS) + [k for k in row.samples if k not in results.METRICS]
    return {metric: stats.summarize(row.values(metric)) for metric in keys}


def _deltas(old: results.Row | None, new: results.Row | None, metrics_shown) -> dict:
    if old is None or new is None:
        return {metric.key: None for metric in metrics_shown}
    return {metric.key: (stats.compare_counted if metric.key in results.COUNTED
                         else stats.compare)(old.values(metric.key), new.values(metric.key))
            for metric in metrics_shown}


def _median(row: results.Row | None, metric: str) -> float | None:
    s = stats.summarize(row.values(metric)) if row else None
    return s.median if s else None


def _find(rows: list[results.Row], role: str) -> results.Row | None:
    return next((r for r in rows if _role(r.key) == role), None)


def _rival_rows(rows: list[results.Row]) -> dict[str, results.Row]:
    """The rival's rows of a table (not preloaded), by variant."""
    return {r.key.variant: r for r in rows
            if r.key.strategy == results.RIVAL_STRATEGY and not r.key.preload}


def _vs_rival(row: results.Row | None,
              rivals: dict[str, results.Row]) -> stats.PairedRatio | None:
    """The row's time against the rival row of its variant (the rival's fresh row for a variant
    the rival lacks, such as shared), round by round; None for the rival's own rows."""
    if row is None or row.key.strategy == results.RIVAL_STRATEGY or not rivals:
        return None
    rival = rivals.get(row.key.variant) or rivals.get(results.BASELINE_VARIANT)
    if rival is None:
        return None
    return stats.paired_ratio(row.values("ns_per_op"), row.rounds, rival.values("ns_per_op"),
                              rival.rounds)


def analyze_run(result_set: results.ResultSet) -> list[Table]:
    """One table per workload and thread count, each row against the table's baseline."""
    tables = []
    order = result_set.strategies()
    for (workload, threads), rows in result_set.tables().items():
        rows = _ordered(rows, order)
        baseline = _find(rows, "baseline")
        reference = _find(rows, "reference")
        shown = _metrics_present(rows)
        reference_time = _median(reference, "ns_per_op")
        rivals = _rival_rows(rows)
        analyzed = [
            AnalyzedRow(
                key=row.key, role=_role(row.key), summary=_summaries(row), old=None,
                delta=_deltas(baseline, row, shown) if row is not baseline else
                {metric.key: None for metric in shown},
                vs_reference=stats.ratio(_median(row, "ns_per_op"), reference_time),
                vs_rival=_vs_rival(row, rivals),
                samples=row.samples, held_method=row.held_method, phases=row.phases)
            for row in rows]
        tables.append(Table(workload=workload, threads=threads, metrics=shown, rows=analyzed,
                            baseline=baseline.key.label if baseline else None,
                            reference=reference.key.label if reference else None,
                            comparing=False,
                            rival=results.RIVAL_STRATEGY if rivals else None,
                            interleaved=bool(result_set.context.get(INTERLEAVED_FIELD)),
                            heap_state=result_set.heap_state))
    return tables


def analyze_compare(old: results.ResultSet, new: results.ResultSet) -> list[Table]:
    """One table per workload and thread count, each NEW row against the same OLD row."""
    tables = []
    order = new.strategies() + [s for s in old.strategies() if s not in new.strategies()]
    old_tables, new_tables = old.tables(), new.tables()
    for table_key in list(new_tables) + [k for k in old_tables if k not in new_tables]:
        new_rows = {r.key: r for r in new_tables.get(table_key, [])}
        old_rows = {r.key: r for r in old_tables.get(table_key, [])}
        union = list(new_rows.values()) + [r for k, r in old_rows.items() if k not in new_rows]
        union = _ordered(union, order)
        # From both runs' rows: a figure one file lacks reads "-" on its side, not gone.
        shown = _metrics_present(list(new_rows.values()) + list(old_rows.values()))
        reference_key = next((r.key for r in union if r.key.is_reference), None)
        reference_time = _median(new_rows.get(reference_key), "ns_per_op")
        new_rivals = _rival_rows(list(new_rows.values()))
        old_rivals = _rival_rows(list(old_rows.values()))
        analyzed = []
        for row in union:
            new_row = new_rows.get(row.key)
            analyzed.append(AnalyzedRow(
                key=row.key, role=_role(row.key), summary=_summaries(new_row),
                old=_summaries(old_rows.get(row.key)),
                delta=_deltas(old_rows.get(row.key), new_row, shown),
                vs_reference=stats.ratio(_median(new_row, "ns_per_op"), reference_time),
                vs_rival=_vs_rival(new_row, new_rivals),
                old_vs_rival=_vs_rival(old_rows.get(row.key), old_rivals),
                samples=new_row.samples if new_row else {},
                held_method=new_row.held_method if new_row else "",
                phases=new_row.phases if new_row else []))
        tables.append(Table(workload=table_key[0], threads=table_key[1], metrics=shown,
                            rows=analyzed, baseline=None,
                            reference=reference_key.label if reference_key else None,
                            comparing=True,
                            rival=(results.RIVAL_STRATEGY if new_rivals or old_rivals
                                   else None),
                            interleaved=bool(new.context.get(INTERLEAVED_FIELD)),
                            heap_state=new.heap_state))
    return tables


def is_excluded(row: AnalyzedRow) -> bool:
    return results.strategy_base(row.key.strategy) in EXCLUDED_FROM_VERDICTS


# The byte figures LEAN_TOLERANCE_* applies to; any other figure ties only when equal.
BYTE_METRICS = ("bytes_per_op", "peak_held_bytes")


def _within_tolerance(metric: str, lowest: float, value: float) -> bool:
    if metric not in BYTE_METRICS:
        return value == lowest
    return value < lowest + max(LEAN_TOLERANCE_BYTES, abs(lowest) * LEAN_TOLERANCE_FRACTION)


def pick(rows: list[AnalyzedRow], metric: str) -> Pick | None:
    """The row with the lowest median of `metric`, or the rows tied for it (see Pick)."""
    candidates = sorted((r for r in rows if r.median(metric) is not None),
                        key=lambda r: r.median(metric))
    if not candidates:
        return None
    leader = candidates[0]
    # One counting process per row: its copies in the repetitions would test as agreement.
    counted = metric in results.COUNTED

    def constant(row: AnalyzedRow) -> bool:
        values = row.values(metric)  # one run says nothing about the next
        return len(values) > 1 and min(values) == max(values)

    def tied(other: AnalyzedRow) -> bool:
        if _within_tolerance(metric, leader.median(metric), other.median(metric)):
            return True
        if counted or (constant(leader) and constant(other)):
            return False  # one count, or the same in every run on both sides: nothing to test
        p = stats.u_test(leader.values(metric), other.values(metric))
        return p is None or p >= stats.ALPHA
    runner_up = candidates[1] if len(candidates) > 1 else None
    p = (stats.u_test(leader.values(metric), runner_up.values(metric))
         if runner_up and not counted else None)
    return Pick(metric=metric, rows=[leader] + [r for r in candidates[1:] if tied(r)],
                runner_up=runner_up, p=p,
                exact=bool(runner_up) and not counted and constant(leader)
                and constant(runner_up), counted=counted)


def noisy_reference(table: Table) -> NoisyReference | None:
    """The reference's spread when it is noisier than the rows it judges, else None."""
    reference = next((r for r in table.rows if r.role == "reference"), None)
    ref_time = reference.summary.get("ns_per_op") if reference else None
    judged = [s.spread for r in table.rows if r.role != "reference"
              for s in [r.summary.get("ns_per_op")] if s and s.n > 1]
    if ref_time is None or ref_time.n < 2 or not judged:
        return None
    rows_spread = float(numpy.median(judged))
    if ref_time.spread > max(NOISY_REFERENCE_FLOOR, NOISY_REFERENCE_FACTOR * rows_spread):
        return NoisyReference(reference_spread=ref_time.spread, rows_spread=rows_spread)
    return None


def pareto_front(rows: list[AnalyzedRow], x: str = "peak_held_bytes",
                 y: str = "ns_per_op") -> list[AnalyzedRow]:
    """The rows no other row beats in both x and y (at least as good in both, better in one)."""
    points = [r for r in rows if r.median(x) is not None and r.median(y) is not None]

    def beats(a: AnalyzedRow, b: AnalyzedRow) -> bool:
        ax, ay, bx, by = a.median(x), a.median(y), b.median(x), b.median(y)
        return ax <= bx and ay <= by and (ax < bx or ay < by)
    return [r for r in points if not any(beats(other, r) for other in points if other is not r)]


def verdict_rows(table: Table) -> list[AnalyzedRow]:
    """The rows a verdict may name: strategies (the baseline included), not the debugging ones,
    not the bench-only wrappers, not the reference; preload rows are judged on their own."""
    return [r for r in table.rows if r.role in ("baseline", "strategy") and not is_excluded(r)]


def rival_judged_rows(table: Table, old: bool = False) -> list[AnalyzedRow]:
    """The rows held against the rival in its verdict line: those a verdict may name and the
    preload rows, each with its ratio to the rival (OLD's when `old`)."""
    return [r for r in table.rows
            if r.role in ("baseline", "strategy", "preload") and not is_excluded(r)
            and r.against_rival(old) is not None]


def rival_tally(tables: list[Table]) -> dict[str, dict[str, int]]:
    """For each strategy (its own rows, not preloaded ones), over every table with the rival's
    rows: how many rows the signed-rank test calls faster and slower than the rival, how many
    it does not tell apart ("~"), and how many it cannot test ("": too few rounds)."""
    tally: dict[str, dict[str, int]] = {}
    for table in tables:
        for row in rival_judged_rows(table):
            if row.key.preload:
                continue
            counts = tally.setdefault(row.key.strategy,
                                      {"faster": 0, "slower": 0, "~": 0, "": 0})
            counts[row.vs_rival.call] += 1
    return tally


def verdict(table: Table) -> Verdict:
    """The fastest and the leanest strategy rows, or the rows tied for it."""
    candidates = verdict_rows(table)
    preloads = [r for r in table.rows if r.role == "preload"]
    return Verdict(
        fastest=pick(candidates, "ns_per_op"),
        leanest=pick(candidates, "peak_held_bytes"),
        fewest_bytes=pick(candidates, "bytes_per_op"),
        best_preload=pick(preloads, "ns_per_op"),
        reference=next((r for r in table.rows if r.role == "reference"), None),
        excluded=[r for r in table.rows if is_excluded(r)],
        noisy_reference=noisy_reference(table),
        pareto=pareto_front(candidates + preloads))
