"""summary.csv: one row per workload/strategy/variant/preload with medians, deltas and p-values,
faults_per_op (the timed loop's page faults per op), and the memory axis: peak_held_bytes,
peak_live_bytes, held_over_live (medians), how held was measured, and whether the row is on its
table's time-vs-held Pareto front. heap_state names the state every figure of the row comes
from (warm: beside a live background set); where the run also ran the row idle,
idle_ns_per_op_median is its time then and idle_over_warm the ratio. Phase workloads add
phase_<name>_held_bytes / _live_bytes / _held_over_live columns, one set per phase. Where the
table has the rival's rows (mimalloc_plain), ratio_to_rival is the row's time over the rival's,
median over the rounds, rival_rounds how many rounds it pairs (0: the ratio of the medians) and
rival_rounds_faster in how many the row was faster, rival_p the two-sided Wilcoxon signed-rank
test of the rounds' ratios (empty under 6 rounds) and rival_call what it says: faster, slower, ~
(not told apart) or empty (not tested); comparing, ratio_to_rival_old is OLD's.

Empty cells mean "not measured" (a metric the workload does not report, a results.json from
before the bench reported it) or "not comparable" (no baseline row, too few repetitions for the
U test, a delta against a zero baseline); allocs_per_op_p and bytes_per_op_p are always empty:
each row's counts are one counting process's, one value with nothing to test.
"""

from __future__ import annotations

import csv

import analysis
import metrics as m
import results

KEY_COLUMNS = ["workload", "threads", "strategy", "variant", "preload", "heap_state", "label",
               "role", "repetitions"]
IDLE_COLUMNS = ["idle_ns_per_op_median", "idle_repetitions", "idle_over_warm"]
CSV_METRICS = (m.TIME, m.ALLOCS, m.BYTES, m.FAULTS, m.THROUGHPUT)


MEMORY_COLUMNS = [metric.csv for metric in m.MEMORY_METRICS]
PHASE_FIGURES = ("held", "live", "held_over_live")


def header(comparing: bool = False, phases: tuple[str, ...] = ()) -> list[str]:
    columns = list(KEY_COLUMNS)
    for metric in CSV_METRICS:
        if comparing:
            columns.append(f"{metric.csv}_old_median")
        columns += [f"{metric.csv}_median", f"{metric.csv}_delta_pct", f"{metric.csv}_p"]
    columns += IDLE_COLUMNS
    for column in MEMORY_COLUMNS:
        columns += [f"{column}_old", column] if comparing else [column]
    columns += ["held_method", "pareto"]
    columns += [results.phase_metric(p, what) for p in phases for what in PHASE_FIGURES]
    columns += ["ns_per_op_spread_pct", "ratio_to_reference", "baseline", "reference",
                "reference_noisy"]
    columns += (["ratio_to_rival_old"] if comparing else []) + [
        "ratio_to_rival", "rival_rounds", "rival_rounds_faster", "rival_p", "rival_call", "rival"]
    return columns


def _number(value: float | None, digits: int = 6) -> str:
    return "" if value is None else f"{value:.{digits}g}"


def rows(table: analysis.Table) -> list[dict]:
    out = []
    verdict = None if table.comparing else analysis.verdict(table)
    pareto = {id(r) for r in verdict.pareto} if verdict else set()
    for row in table.rows:
        time = row.summary.get("ns_per_op")
        record = {"workload": table.workload, "threads": table.threads,
                  "strategy": row.key.strategy, "variant": row.key.variant,
                  "preload": row.key.preload, "heap_state": table.heap_state,
                  "label": row.label, "role": row.role,
                  "repetitions": time.n if time else 0}
        for metric in CSV_METRICS:
            summary = row.summary.get(metric.key)
            delta = row.delta.get(metric.key)
            if table.comparing:
                old = (row.old or {}).get(metric.key)
                record[f"{metric.csv}_old_median"] = _number(old.median if old else None)
            record[f"{metric.csv}_median"] = _number(summary.median if summary else None)
            record[f"{metric.csv}_delta_pct"] = _number(
                delta.change * 100 if delta and delta.change is not None else None, 4)
            record[f"{metric.csv}_p"] = _number(delta.p if delta else None, 4)
        idle = row.summary.get(results.IDLE_TIME)
        record["idle_ns_per_op_median"] = _number(idle.median if idle else None)
        record["idle_repetitions"] = idle.n if idle else ""
        record["idle_over_warm"] = _number(
            idle.median / time.median if idle and time and time.median else None, 4)
        for column in MEMORY_COLUMNS:
            record[column] = _number(row.median(column))
            if table.comparing:
                old = (row.old or {}).get(column)
                record[f"{column}_old"] = _number(old.median if old else None)
        record["held_method"] = row.held_method
        record["pareto"] = "yes" if id(row) in pareto else ""
        for phase in row.phases:
            for what in PHASE_FIGURES:
                key = results.phase_metric(phase, what)
                record[key] = _number(row.median(key))
        record["ns_per_op_spread_pct"] = _number(time.spread * 100 if time else None, 3)
        record["ratio_to_reference"] = _number(row.vs_reference, 4)
        record["baseline"] = "old" if table.comparing else (table.baseline or "")
        record["reference"] = table.reference or ""
        record["reference_noisy"] = "yes" if verdict and verdict.noisy_reference else ""
        if table.comparing:
            record["ratio_to_rival_old"] = _number(
                row.old_vs_rival.median if row.old_vs_rival else None, 4)
        paired = row.vs_rival
        record["ratio_to_rival"] = _number(paired.median if paired else None, 4)
        record["rival_rounds"] = paired.rounds if paired else ""
        record["rival_rounds_faster"] = paired.faster if paired else ""
        record["rival_p"] = _number(paired.p if paired else None, 4)
        record["rival_call"] = paired.call if paired else ""
        record["rival"] = table.rival or ""
        out.append(record)
    return out


def phases_of(tables: list[analysis.Table]) -> tuple[str, ...]:
    seen: dict[str, None] = {}
    for table in tables:
        for phase in table.phases:
            seen.setdefault(phase, None)
    return tuple(seen)


def write(path: str, tables: list[analysis.Table]) -> None:
    comparing = any(t.comparing for t in tables)
    with open(path, "w", newline="", encoding="utf-8") as f:
        writer = csv.DictWriter(f, fieldnames=header(comparing, phases_of(tables)),
                                restval="")
        writer.writeheader()
        for table in tables:
            writer.writerows(rows(table))
