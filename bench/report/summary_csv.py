"""summary.csv: one row per workload/strategy/variant/preload with medians, deltas and p-values.

Empty cells mean "not measured" (a metric the workload does not report) or "not comparable"
(no baseline row, too few repetitions for the U test, a delta against a zero baseline).
"""

from __future__ import annotations

import csv

import analysis
import metrics as m

KEY_COLUMNS = ["workload", "threads", "strategy", "variant", "preload", "label", "role",
               "repetitions"]
CSV_METRICS = (m.TIME, m.ALLOCS, m.BYTES, m.THROUGHPUT)


def header(comparing: bool = False) -> list[str]:
    columns = list(KEY_COLUMNS)
    for metric in CSV_METRICS:
        if comparing:
            columns.append(f"{metric.csv}_old_median")
        columns += [f"{metric.csv}_median", f"{metric.csv}_delta_pct", f"{metric.csv}_p"]
    columns += ["ns_per_op_spread_pct", "ratio_to_reference", "baseline", "reference"]
    return columns


def _number(value: float | None, digits: int = 6) -> str:
    return "" if value is None else f"{value:.{digits}g}"


def rows(table: analysis.Table) -> list[dict]:
    out = []
    for row in table.rows:
        time = row.summary.get("ns_per_op")
        record = {"workload": table.workload, "threads": table.threads,
                  "strategy": row.key.strategy, "variant": row.key.variant,
                  "preload": row.key.preload, "label": row.label, "role": row.role,
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
        record["ns_per_op_spread_pct"] = _number(time.spread * 100 if time else None, 3)
        record["ratio_to_reference"] = _number(row.vs_reference, 4)
        record["baseline"] = "old" if table.comparing else (table.baseline or "")
        record["reference"] = table.reference or ""
        out.append(record)
    return out


def write(path: str, tables: list[analysis.Table]) -> None:
    comparing = any(t.comparing for t in tables)
    with open(path, "w", newline="", encoding="utf-8") as f:
        writer = csv.DictWriter(f, fieldnames=header(comparing))
        writer.writeheader()
        for table in tables:
            writer.writerows(rows(table))
