"""Turns results into comparison tables: which row is compared with which, and the verdict.

One table per workload (and thread count). In a run, every row is compared with the baseline
row of its table — ``new_delete/fresh`` for workloads, ``new_delete`` for the Alloc* patterns —
and timed against the reference row: ``limit`` (the workload with no allocation at all) or,
for the patterns, ``bare_list``. In a comparison of two runs, every row of NEW is compared with
the same row of OLD.
"""

from __future__ import annotations

import dataclasses

import metrics as m
import results
import stats


@dataclasses.dataclass
class AnalyzedRow:
    key: results.RowKey
    role: str  # "baseline", "strategy", "preload" or "reference"
    summary: dict[str, stats.Summary | None]        # this row (NEW when comparing)
    old: dict[str, stats.Summary | None] | None     # OLD's same row when comparing
    delta: dict[str, stats.Delta | None]
    vs_reference: float | None                      # time/op divided by the reference's

    @property
    def label(self) -> str:
        return self.key.label

    def median(self, metric: str) -> float | None:
        s = self.summary.get(metric)
        return s.median if s else None


@dataclasses.dataclass
class Verdict:
    fastest: AnalyzedRow | None
    leanest: AnalyzedRow | None
    leanest_ties: int               # other rows within LEAN_TOLERANCE of the lowest B/op
    best_preload: AnalyzedRow | None
    reference: AnalyzedRow | None


@dataclasses.dataclass
class Table:
    workload: str
    threads: int
    metrics: list[m.Metric]
    rows: list[AnalyzedRow]
    baseline: str | None    # label of the baseline row, or None (compare mode, or missing)
    reference: str | None   # label of the reference row, or None
    comparing: bool         # True: deltas are NEW vs OLD

    @property
    def title(self) -> str:
        return self.workload + (f" threads:{self.threads}" if self.threads != 1 else "")

    @property
    def is_pattern(self) -> bool:
        return all(r.key.is_pattern or r.key.is_reference for r in self.rows)

    def repetitions(self) -> tuple[int, int]:
        ns = [s.n for r in self.rows for s in [r.summary.get("ns_per_op")] if s]
        return (min(ns), max(ns)) if ns else (0, 0)


def _role(key: results.RowKey) -> str:
    if key.is_reference:
        return "reference"
    if key.preload:
        return "preload"
    if key.strategy == results.BASELINE_STRATEGY and key.variant in ("", results.BASELINE_VARIANT):
        return "baseline"
    return "strategy"


# B/op values this close count as equally lean (amortised pool refills make "0" read 0.0003).
LEAN_TOLERANCE_BYTES = 1.0
LEAN_TOLERANCE_FRACTION = 0.01

_ROLE_ORDER = {"baseline": 0, "strategy": 1, "preload": 2, "reference": 3}
_VARIANT_ORDER = {"fresh": 0, "pooled": 1}


def _ordered(rows: list[results.Row], strategy_order: list[str]) -> list[results.Row]:
    """Baseline, strategies (in the binary's order, fresh before pooled), preloads, reference."""
    rank = {s: i for i, s in enumerate(strategy_order)}
    preload_rank: dict[str, int] = {}
    for row in rows:
        preload_rank.setdefault(row.key.preload, len(preload_rank))

    def key(row: results.Row):
        k = row.key
        return (_ROLE_ORDER[_role(k)], preload_rank[k.preload], rank.get(k.strategy, len(rank)),
                k.strategy, _VARIANT_ORDER.get(k.variant, 2))
    return sorted(rows, key=key)


def _metrics_present(rows) -> list[m.Metric]:
    present = [metric for metric in m.TABLE_METRICS
               if metric not in m.OPTIONAL_METRICS or any(r.values(metric.key) for r in rows)]
    return present


def _summaries(row: results.Row | None) -> dict[str, stats.Summary | None]:
    if row is None:
        return {}
    return {metric: stats.summarize(row.values(metric)) for metric in results.METRICS}


def _deltas(old: results.Row | None, new: results.Row | None, metrics_shown) -> dict:
    if old is None or new is None:
        return {metric.key: None for metric in metrics_shown}
    return {metric.key: stats.compare(old.values(metric.key), new.values(metric.key))
            for metric in metrics_shown}


def _median(row: results.Row | None, metric: str) -> float | None:
    s = stats.summarize(row.values(metric)) if row else None
    return s.median if s else None


def _find(rows: list[results.Row], role: str) -> results.Row | None:
    return next((r for r in rows if _role(r.key) == role), None)


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
        analyzed = [
            AnalyzedRow(
                key=row.key, role=_role(row.key), summary=_summaries(row), old=None,
                delta=_deltas(baseline, row, shown) if row is not baseline else
                {metric.key: None for metric in shown},
                vs_reference=stats.ratio(_median(row, "ns_per_op"), reference_time))
            for row in rows]
        tables.append(Table(workload=workload, threads=threads, metrics=shown, rows=analyzed,
                            baseline=baseline.key.label if baseline else None,
                            reference=reference.key.label if reference else None,
                            comparing=False))
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
        shown = _metrics_present(union)
        reference_key = next((r.key for r in union if r.key.is_reference), None)
        reference_time = _median(new_rows.get(reference_key), "ns_per_op")
        analyzed = [
            AnalyzedRow(
                key=row.key, role=_role(row.key), summary=_summaries(new_rows.get(row.key)),
                old=_summaries(old_rows.get(row.key)),
                delta=_deltas(old_rows.get(row.key), new_rows.get(row.key), shown),
                vs_reference=stats.ratio(_median(new_rows.get(row.key), "ns_per_op"),
                                         reference_time))
            for row in union]
        tables.append(Table(workload=table_key[0], threads=table_key[1], metrics=shown,
                            rows=analyzed, baseline=None,
                            reference=reference_key.label if reference_key else None,
                            comparing=True))
    return tables


def verdict(table: Table) -> Verdict:
    """The fastest and the leanest strategy rows (preload rows are reported on their own)."""
    candidates = [r for r in table.rows if r.role in ("baseline", "strategy")
                  and r.median("ns_per_op") is not None]
    reference = next((r for r in table.rows if r.role == "reference"), None)
    fastest = min(candidates, key=lambda r: r.median("ns_per_op"), default=None)
    with_bytes = [r for r in candidates if r.median("bytes_per_op") is not None]
    leanest, ties = None, 0
    if with_bytes:
        least = min(r.median("bytes_per_op") for r in with_bytes)
        bound = least + max(LEAN_TOLERANCE_BYTES, least * LEAN_TOLERANCE_FRACTION)
        lean = [r for r in with_bytes if r.median("bytes_per_op") < bound]
        leanest = min(lean, key=lambda r: r.median("ns_per_op"))
        ties = len(lean) - 1
    preloads = [r for r in table.rows if r.role == "preload" and r.median("ns_per_op") is not None]
    best_preload = min(preloads, key=lambda r: r.median("ns_per_op"), default=None)
    return Verdict(fastest=fastest, leanest=leanest, leanest_ties=ties,
                   best_preload=best_preload, reference=reference)
