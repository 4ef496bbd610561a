"""The comparison tables as text (benchstat's layout) and as cells the HTML report reuses.

A delta cell reads ``-50.41% (p=0.008)`` when the U test finds a difference, ``~ (p=0.310)``
when it does not, and ``~ (n=2)`` when a side has too few repetitions to test at all.
"""

from __future__ import annotations

import dataclasses

import analysis
import metrics as m
import stats

BASE_MARK = "base"
MISSING = "-"


@dataclasses.dataclass
class Grid:
    """A table as strings: headers, rows, and which columns are right-aligned (numbers)."""
    headers: list[str]
    rows: list[list[str]]
    numeric: list[bool]
    better: list[int]  # per column: -1 a lower delta is better, +1 a higher one, 0 not a delta
    roles: list[str]  # one per row: the AnalyzedRow role, for styling


def format_delta(delta: stats.Delta | None) -> str:
    if delta is None:
        return MISSING
    if delta.p is None:
        return f"~ (n={min(delta.n_old, delta.n_new)})"
    if not delta.significant:
        return f"~ (p={delta.p:.3f})"
    change = "+inf%" if delta.change is None else f"{delta.change * 100:+.2f}%"
    return f"{change} (p={delta.p:.3f})"


def format_value(metric: m.Metric, summary: stats.Summary | None) -> str:
    if summary is None:
        return MISSING
    text = metric.format(summary.median)
    if metric.show_spread and summary.n > 1:
        text += f" ±{summary.spread * 100:.0f}%"
    return text


def format_ratio(value: float | None) -> str:
    return MISSING if value is None else f"{value:.2f}x"


def reference_header(table: analysis.Table) -> str:
    return f"vs {table.reference}"


def grid(table: analysis.Table) -> Grid:
    """A run's table: each row's medians, its delta against the baseline, its ratio to limit."""
    if table.comparing:
        return compare_grid(table)
    headers, numeric, better = ["strategy/variant"], [False], [0]
    for metric in table.metrics:
        headers += [metric.header, "vs base"]
        numeric += [True, True]
        better += [0, -1 if metric.lower_is_better else 1]
    if table.reference:
        headers.append(reference_header(table))
        numeric.append(True)
        better.append(0)
    rows = []
    for row in table.rows:
        cells = [row.label]
        for metric in table.metrics:
            cells.append(format_value(metric, row.summary.get(metric.key)))
            cells.append(BASE_MARK if row.role == "baseline"
                         else format_delta(row.delta[metric.key]))
        if table.reference:
            cells.append(format_ratio(row.vs_reference))
        rows.append(cells)
    return Grid(headers, rows, numeric, better, [r.role for r in table.rows])


def compare_grid(table: analysis.Table) -> Grid:
    """Two runs' table: OLD and NEW medians of each row and NEW's delta against OLD."""
    headers, numeric, better = ["strategy/variant"], [False], [0]
    for metric in table.metrics:
        headers += [f"old {metric.header}", f"new {metric.header}", "delta"]
        numeric += [True, True, True]
        better += [0, 0, -1 if metric.lower_is_better else 1]
    if table.reference:
        headers.append(reference_header(table) + " (new)")
        numeric.append(True)
        better.append(0)
    rows = []
    for row in table.rows:
        cells = [row.label]
        for metric in table.metrics:
            cells.append(format_value(metric, (row.old or {}).get(metric.key)))
            cells.append(format_value(metric, row.summary.get(metric.key)))
            cells.append(format_delta(row.delta[metric.key]))
        if table.reference:
            cells.append(format_ratio(row.vs_reference))
        rows.append(cells)
    return Grid(headers, rows, numeric, better, [r.role for r in table.rows])


def caption(table: analysis.Table) -> str:
    low, high = table.repetitions()
    runs = f"{low} runs each" if low == high else f"{low}-{high} runs each"
    if table.comparing:
        return f"{table.title} — new vs old, {runs}"
    parts = [table.title, f"baseline {table.baseline or 'missing'}",
             f"reference {table.reference or 'missing'}", runs]
    return " — ".join(parts[:1]) + " — " + ", ".join(parts[1:])


def render(g: Grid, indent: str = "") -> str:
    widths = [max(len(h), *(len(r[i]) for r in g.rows)) if g.rows else len(h)
              for i, h in enumerate(g.headers)]

    def line(cells):
        out = [c.rjust(w) if num else c.ljust(w) for c, w, num in zip(cells, widths, g.numeric)]
        return (indent + "  ".join(out)).rstrip()
    rule = indent + "  ".join("-" * w for w in widths)
    return "\n".join([line(g.headers), rule] + [line(r) for r in g.rows])


def _from_limit(row: analysis.AnalyzedRow, reference: analysis.AnalyzedRow | None) -> str:
    if row.vs_reference is None or reference is None:
        return ""
    return f", {row.vs_reference:.2f}x the time of {reference.label}"


def verdict_lines(table: analysis.Table) -> list[str]:
    """A few plain sentences: the fastest, the leanest, how far each is from the limit."""
    if table.comparing:
        return compare_verdict_lines(table)
    v = analysis.verdict(table)
    lines = []
    if v.fastest:
        lines.append(f"fastest: {v.fastest.label} at {m.format_time(v.fastest.median('ns_per_op'))}"
                     f"/op{_from_limit(v.fastest, v.reference)}")
    if v.leanest:
        bytes_text = m.format_bytes(v.leanest.median("bytes_per_op"))
        ties = (f" (and {v.leanest_ties} more within "
                f"{m.format_bytes(analysis.LEAN_TOLERANCE_BYTES)} or "
                f"{analysis.LEAN_TOLERANCE_FRACTION:.0%})" if v.leanest_ties else "")
        ref_bytes = v.reference.median("bytes_per_op") if v.reference else None
        ref_text = (f", {v.reference.label} has {m.format_bytes(ref_bytes)}/op"
                    if ref_bytes is not None else "")
        lines.append(f"leanest: {v.leanest.label} at {bytes_text}/op{ties}{ref_text}"
                     f"{_from_limit(v.leanest, v.reference)}")
    if v.best_preload:
        lines.append(f"best process allocator: {v.best_preload.label} at "
                     f"{m.format_time(v.best_preload.median('ns_per_op'))}/op"
                     f"{_from_limit(v.best_preload, v.reference)}")
    return lines


def compare_verdict_lines(table: analysis.Table) -> list[str]:
    faster = slower = same = 0
    for row in table.rows:
        d = row.delta.get("ns_per_op")
        if d is None or not d.significant or d.change is None:
            same += d is not None
        elif d.change < 0:
            faster += 1
        else:
            slower += 1
    return [f"time/op: {faster} faster, {slower} slower, {same} unchanged (p >= {stats.ALPHA})"]


def render_table(table: analysis.Table) -> str:
    parts = [caption(table), render(grid(table), "  ")]
    parts += ["  " + line for line in verdict_lines(table)]
    return "\n".join(parts)


def render_all(tables: list[analysis.Table]) -> str:
    return "\n\n".join(render_table(t) for t in tables) + "\n"
