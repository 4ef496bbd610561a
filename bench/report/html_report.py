"""report.html: the run's tables, verdicts and charts in one file that stands alone (the charts
are embedded as base64 PNG, no external resources)."""

from __future__ import annotations

import base64
import html
import os

import analysis
import charts
import in_process
import tables as text_tables

STYLE = """
body { font-family: system-ui, sans-serif; margin: 2em; color: #222; max-width: 1500px; }
h1 { margin-bottom: 0.2em; } h2 { margin-top: 2em; border-bottom: 1px solid #ccc; }
.context { color: #555; font-size: 0.9em; } .context td { padding: 0 1em 0 0; }
table.results { border-collapse: collapse; font-size: 0.85em; margin: 0.6em 0; }
table.results th, table.results td { padding: 3px 8px; border-bottom: 1px solid #eee;
  white-space: nowrap; }
table.results th { background: #f3f3f3; text-align: left; }
td.num { text-align: right; font-variant-numeric: tabular-nums; }
tr.baseline td { font-weight: bold; } tr.reference td { font-style: italic; color: #2a6d3a; }
tr.preload td:first-child { color: #6a4c93; } tr.plain td { color: #777; }
.note { margin: 0.2em 0 0.2em 1em; color: #555; font-size: 0.9em; }
.note.warn { color: #8a4b00; background: #fff7e6; padding: 2px 6px; }
h3 { font-size: 1em; margin: 1em 0 0.2em 0; }
td.better { color: #1a7f37; } td.worse { color: #b42318; } td.same { color: #888; }
.caption { color: #555; } .verdict { margin: 0.4em 0 0.4em 1em; }
img.chart { max-width: 100%; border: 1px solid #eee; margin: 0.5em 0; }
.notes { background: #fff7e6; border-left: 4px solid #f0a020; padding: 0.5em 1em; }
"""


def _img(path: str, alt: str) -> str:
    with open(path, "rb") as f:
        data = base64.b64encode(f.read()).decode("ascii")
    return f'<img class="chart" alt="{html.escape(alt)}" src="data:image/png;base64,{data}">'


def _cell_class(text: str, numeric: bool, better: int) -> str:
    classes = ["num"] if numeric else []
    if better and text[:1] in "+-" and text != text_tables.MISSING:
        lower = text.startswith("-")
        classes.append("better" if (lower and better < 0) or (not lower and better > 0)
                       else "worse")
    elif better and text.startswith("~"):
        classes.append("same")
    return f' class="{" ".join(classes)}"' if classes else ""


def table_html(grid: text_tables.Grid) -> str:
    head = "".join(f"<th>{html.escape(h)}</th>" for h in grid.headers)
    body = []
    for role, cells in zip(grid.roles, grid.rows):
        tds = "".join(f"<td{_cell_class(c, n, b)}>{html.escape(c)}</td>"
                      for c, n, b in zip(cells, grid.numeric, grid.better))
        body.append(f'<tr class="{role}">{tds}</tr>')
    return (f'<table class="results"><thead><tr>{head}</tr></thead>'
            f'<tbody>{"".join(body)}</tbody></table>')


def _context_html(context: dict) -> str:
    fields = [("date", "date"), ("host", "host_name"), ("CPUs", "num_cpus"),
              ("MHz", "mhz_per_cpu"), ("CPU scaling", "cpu_scaling_enabled"),
              ("binary", "executable"), ("command", "pmrkit_command"),
              ("repetitions", "pmrkit_repetitions"), ("min time (s)", "pmrkit_min_time"),
              ("heap state", "pmrkit_heap_state"),
              ("idle repetitions", "pmrkit_idle_repetitions")]
    rows = "".join(f"<tr><td>{label}</td><td>{html.escape(str(context[key]))}</td></tr>"
                   for label, key in fields if key in context)
    return f'<table class="context">{rows}</table>'


def write(path: str, title: str, tables: list[analysis.Table], chart_paths: dict[str, str],
          context: dict, notes: list[str]) -> None:
    parts = [f"<!DOCTYPE html><html><head><meta charset='utf-8'><title>{html.escape(title)}"
             f"</title><style>{STYLE}</style></head><body>",
             f"<h1>{html.escape(title)}</h1>", _context_html(context)]
    heap = text_tables.heap_state_line(context)
    if heap:
        parts.append(f"<p><b>{html.escape(heap)}</b></p>")
    counted = text_tables.counted_line(tables)
    if counted:
        parts.append(f"<p>{html.escape(counted)}</p>")
    rival = text_tables.rival_line(tables)
    if rival:
        parts.append(f"<p>{html.escape(rival)}</p>")
    tally = text_tables.rival_tally_lines(tables)
    if tally:
        parts.append(f"<p>{html.escape(tally[0])}</p>")
        if tally[1:]:
            parts.append("<ul>" + "".join(f"<li>{html.escape(line.strip())}</li>"
                                          for line in tally[1:]) + "</ul>")
    if notes:
        parts.append('<div class="notes">' + "<br>".join(html.escape(n) for n in notes)
                     + "</div>")
    parts.append("<p>Each delta is the change of the median against the baseline row "
                 "(against OLD when comparing two runs); <b>~</b> means a two-sided "
                 "Mann&ndash;Whitney U test over the repetitions found no difference "
                 "(p &ge; 0.05) or had too few samples; allocs/op and B/op, counted once "
                 "per row, carry no p-value. &ldquo;vs limit&rdquo; is time/op "
                 "divided by the reference row's (the workload without allocation). "
                 "<b>peak held</b> is the most memory a row's strategy held at once, "
                 "<b>held/live</b> that over the most bytes the workload had live (1.0x is "
                 "the floor); each table says how held was measured. A verdict names one "
                 "row only when the U test separates it from the runner-up, and otherwise "
                 "the tied rows; <b>&mdash;</b> marks a figure a row lacks.</p>")
    one_process = in_process.grids(context.get(in_process.CONTEXT_FIELD) or {})
    titles = [t.title for t in tables] + [title for title, _, _ in one_process]
    toc = "".join(f'<li><a href="#{charts.slug(t)}">{html.escape(t)}</a></li>' for t in titles)
    parts.append(f"<ul>{toc}</ul>")
    scaling_done = set()
    for table in tables:
        parts.append(f'<h2 id="{charts.slug(table.title)}">{html.escape(table.title)}</h2>')
        parts.append(f'<div class="caption">{html.escape(text_tables.caption(table))}</div>')
        parts.append(table_html(text_tables.grid(table)))
        for line in text_tables.verdict_lines(table):
            if line.startswith("note: the reference"):
                parts.append(f'<div class="note warn">{html.escape(line)}</div>')
            elif line.startswith("note:") or line.startswith("peak held measured"):
                parts.append(f'<div class="note">{html.escape(line)}</div>')
            else:
                parts.append(f'<div class="verdict">{html.escape(line)}</div>')
        phases = None if table.comparing else text_tables.phase_grid(table)
        if phases:
            parts.append("<h3>Held and held/live at the end of each phase (medians)</h3>")
            parts.append(table_html(phases))
        chart = chart_paths.get(table.title)
        if chart and os.path.exists(chart):
            parts.append(_img(chart, f"{table.title}: time/op and B/op per strategy"))
        memory = chart_paths.get(charts.memory_key(table.title))
        if memory and os.path.exists(memory):
            parts.append(_img(memory, f"{table.title}: time/op against peak held, "
                                      "Pareto front marked"))
        scaling = chart_paths.get(charts.scaling_key(table.workload))
        if scaling and table.workload not in scaling_done and os.path.exists(scaling):
            scaling_done.add(table.workload)
            parts.append(f"<h3>{html.escape(table.workload)}: throughput against threads</h3>")
            parts.append(_img(scaling, f"{table.workload}: throughput against threads"))
    for title, caption, grid in one_process:
        parts.append(f'<h2 id="{charts.slug(title)}">{html.escape(title)}</h2>')
        parts.append(f'<div class="caption">{html.escape(caption)}</div>')
        parts.append(table_html(grid))
    parts.append("</body></html>\n")
    with open(path, "w", encoding="utf-8") as f:
        f.write("\n".join(parts))
