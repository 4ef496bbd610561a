"""The comparison tables as text (benchstat's layout) and as cells the HTML report reuses.

A delta cell reads ``-50.41% (p=0.008)`` when the U test finds a difference, ``~ (p=0.310)``
when it does not, and ``~ (n=2)`` when a side has too few repetitions to test at all. The
counted metrics (allocs/op, B/op: one counting process per row) have one value a side and no
test: ``-90.00% (counted once)``, ``= (counted once)`` when the counts are equal. A figure
a row lacks (not measured, or a results.json from before the bench reported it) reads ``—``.
A ``vs mimalloc_plain`` cell reads ``1.04x (4/11)``: the median over the rounds of the row's
time over the rival's in the same round, and in how many of those rounds the row was faster
(``1.04x`` alone: the rounds were not known, the ratio of the medians; see rival_line()).
Whether the rounds tell a row from the rival is the verdict's last line (rival_verdict_line())
and, counted per strategy, the report's head (rival_tally_lines()).
"""

from __future__ import annotations

import dataclasses

import analysis
import metrics as m
import results
import stats

BASE_MARK = "base"
MISSING = "—"
# How many tied rows a verdict names before it says "and N more".
TIED_NAMES_SHOWN = 4


@dataclasses.dataclass
class Grid:
    """A table as strings: headers, rows, and which columns are right-aligned (numbers)."""
    headers: list[str]
    rows: list[list[str]]
    numeric: list[bool]
    better: list[int]  # per column: -1 a lower delta is better, +1 a higher one, 0 not a delta
    roles: list[str]  # one per row: the AnalyzedRow role, for styling


COUNTED_ONCE = "(counted once)"


def format_delta(delta: stats.Delta | None) -> str:
    if delta is None:
        return MISSING
    if delta.counted:
        if delta.change == 0:
            return f"= {COUNTED_ONCE}"  # no sign: the HTML colours signed cells better or worse
        change = "+inf%" if delta.change is None else f"{delta.change * 100:+.2f}%"
        return f"{change} {COUNTED_ONCE}"
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


def rival_header(table: analysis.Table) -> str:
    return f"vs {table.rival}"


def format_paired(value: stats.PairedRatio | None) -> str:
    if value is None:
        return MISSING
    if value.rounds == 0:
        return f"{value.median:.2f}x"
    return f"{value.median:.2f}x ({value.faster}/{value.rounds})"


def rival_line(tables: list[analysis.Table]) -> str:
    """What the rival column means, for the head of a report that has one ("" if none)."""
    rival = next((t.rival for t in tables if t.rival), None)
    if not rival:
        return ""
    return (f"vs {rival}: each round's time/op over {rival}'s row of the same variant (its "
            f"fresh row where it has none) in the same round, median over the rounds; "
            f"(k/n): faster than {rival} in k of n rounds")


def _cannot_call(rival: str, rounds: int, run: str) -> str:
    """Why no row of `run` ("OLD ", "NEW " or "") is held against the rival, given the most
    rounds any row pairs."""
    if rounds == 0:
        return (f"{run}against {rival}: the rounds are unknown (results merged from several "
                "runs), so the column is the ratio of the medians and calls nothing")
    return (f"{run}against {rival}: {rounds} rounds cannot tell a row from it (the paired test "
            f"needs {stats.MIN_PAIRED_ROUNDS}: --repetitions {stats.MIN_PAIRED_ROUNDS} or more)")


def rival_verdict_line(table: analysis.Table, old: bool = False) -> str:
    """Which rows the signed-rank test finds faster or slower than the rival round by round,
    and which it does not tell apart ("" when the table has no rival)."""
    rows = analysis.rival_judged_rows(table, old)
    if not table.rival or not rows:
        return ""
    paired = {id(r): r.against_rival(old) for r in rows}
    rounds = max(p.rounds for p in paired.values())
    run = "OLD " if old else "NEW " if table.comparing else ""
    if all(p.p is None for p in paired.values()):
        return _cannot_call(table.rival, rounds, run)

    def listed(call: str, with_ratio: bool) -> str:
        named = sorted((r for r in rows if paired[id(r)].call == call),
                       key=lambda r: paired[id(r)].median, reverse=call == "slower")
        if not named:
            return ""
        texts = [r.label + (f" {paired[id(r)].median:.2f}x (p={paired[id(r)].p:.3f})"
                            if with_ratio else "") for r in named[:TIED_NAMES_SHOWN]]
        more = len(named) - len(texts)
        return ", ".join(texts) + (f" and {more} more" if more else "")

    parts = [f"{title}: {names}" for title, names in (
        ("faster", listed("faster", True)), ("slower", listed("slower", True)),
        ("not told apart", listed("~", False)),
        ("too few rounds", listed("", False))) if names]
    return (f"{run}against {table.rival} (signed-rank test over {rounds} rounds, "
            f"p < {stats.ALPHA}): " + "; ".join(parts))


def rival_tally_lines(tables: list[analysis.Table]) -> list[str]:
    """For the head of a report: each strategy's rows against the rival, counted over every
    table (the verdict lines name them); [] when no table has the rival's rows."""
    rival = next((t.rival for t in tables if t.rival), None)
    tally = analysis.rival_tally(tables)
    if not rival or not tally:
        return []
    rounds = max(r.vs_rival.rounds for t in tables for r in analysis.rival_judged_rows(t))
    run = "NEW " if any(t.comparing for t in tables) else ""
    if all(counts[""] == sum(counts.values()) for counts in tally.values()):
        return [_cannot_call(rival, rounds, run)]
    lines = [f"{run}against {rival}, row by row (signed-rank test over the rounds, "
             f"p < {stats.ALPHA}; each table's verdict names the rows):"]
    for strategy, counts in sorted(tally.items(), key=lambda kv: (kv[1]["slower"], kv[0])):
        total = sum(counts.values())
        untested = f", {counts['']} with too few rounds" if counts[""] else ""
        lines.append(f"  {strategy}: faster in {counts['faster']}, slower in "
                     f"{counts['slower']}, not told apart in {counts['~']} of {total} rows"
                     f"{untested}")
    return lines


def grid(table: analysis.Table) -> Grid:
    """A run's table: each row's medians, its delta against the baseline, its ratio to limit."""
    if table.comparing:
        return compare_grid(table)
    headers, numeric, better = ["strategy/variant"], [False], [0]
    for metric in table.metrics:
        headers.append(metric.header)
        numeric.append(True)
        better.append(0)
        if metric.delta_in_run:
            headers.append("vs base")
            numeric.append(True)
            better.append(-1 if metric.lower_is_better else 1)
    if table.reference:
        headers.append(reference_header(table))
        numeric.append(True)
        better.append(0)
    if table.rival:
        headers.append(rival_header(table))
        numeric.append(True)
        better.append(0)
    rows = []
    for row in table.rows:
        cells = [row.label]
        for metric in table.metrics:
            cells.append(format_value(metric, row.summary.get(metric.key)))
            if metric.delta_in_run:
                cells.append(BASE_MARK if row.role == "baseline"
                             else format_delta(row.delta[metric.key]))
        if table.reference:
            cells.append(format_ratio(row.vs_reference))
        if table.rival:
            cells.append(format_paired(row.vs_rival))
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
    if table.rival:
        headers += [f"old {rival_header(table)}", f"new {rival_header(table)}"]
        numeric += [True, True]
        better += [0, 0]
    rows = []
    for row in table.rows:
        cells = [row.label]
        for metric in table.metrics:
            cells.append(format_value(metric, (row.old or {}).get(metric.key)))
            cells.append(format_value(metric, row.summary.get(metric.key)))
            cells.append(format_delta(row.delta[metric.key]))
        if table.reference:
            cells.append(format_ratio(row.vs_reference))
        if table.rival:
            cells += [format_paired(row.old_vs_rival), format_paired(row.vs_rival)]
        rows.append(cells)
    return Grid(headers, rows, numeric, better, [r.role for r in table.rows])


def _run_count(low: int, high: int, interleaved: str) -> str:
    if high == 0:
        return "no runs"
    return (f"{low} {interleaved}{'run' if high == 1 else 'runs'}" if low == high
            else f"{low}-{high} {interleaved}runs")


def caption(table: analysis.Table) -> str:
    interleaved = "interleaved " if table.interleaved else ""
    runs = _run_count(*table.repetitions(), interleaved) + " each"
    heap = f", {table.heap_state} heap" if table.heap_state else ""
    if table.comparing:
        if table.repetitions(old=True) != table.repetitions():
            def side(counts: tuple[int, int]) -> str:
                return "none" if counts[1] == 0 else _run_count(*counts, interleaved) + " each"
            runs = f"old {side(table.repetitions(old=True))}, new {side(table.repetitions())}"
        return f"{table.title} — new vs old, {runs}{heap}"
    # A workload whose every op allocates (the container ops, the recorded patterns) has no
    # reference row to time against; saying "reference missing" read as a row the run lost.
    reference = [f"reference {table.reference}"] if table.reference else []
    parts = [table.title, f"baseline {table.baseline or 'missing'}", *reference, runs + heap]
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


def _names(rows: list[analysis.AnalyzedRow]) -> str:
    names = [r.label for r in rows[:TIED_NAMES_SHOWN]]
    more = len(rows) - len(names)
    return ", ".join(names) + (f" and {more} more" if more else "")


def _runs(rows: list[analysis.AnalyzedRow], metric: str) -> str:
    ns = sorted({s.n for r in rows for s in [r.summary.get(metric)] if s})
    if not ns:
        return "no runs"
    return (f"{ns[0]}" if len(ns) == 1 else f"{ns[0]}-{ns[-1]}") + (
        " run each" if ns == [1] else " runs each")


def _pick_line(title: str, pick: analysis.Pick, value: str,
               reference: analysis.AnalyzedRow | None) -> str:
    """'fastest: X at 1µs/op (p=0.008 against Y, 5 runs each)', or the tied group."""
    leader = pick.leader
    if pick.winner is None and pick.counted:
        return (f"{title}: no single row; tied ({_tolerance(pick.metric)}, one counting run "
                f"each): {_names(pick.rows)}; lowest {leader.label} at {value}")
    if pick.winner is None:
        why = ("too few runs to tell them apart" if pick.p is None and pick.runner_up
               else f"U test p ≥ {stats.ALPHA}")
        return (f"{title}: no single row; tied ({why}, {_runs(pick.rows, pick.metric)}): "
                f"{_names(pick.rows)}; lowest median {leader.label} at {value}")
    if pick.runner_up is None:
        against = ""
    elif pick.counted:
        against = (f" (runner-up {pick.runner_up.label}; one counting run each, compared by "
                   "value, untested)")
    elif pick.exact:
        against = (f" (runner-up {pick.runner_up.label}; both the same in every run, "
                   f"{_runs([leader, pick.runner_up], pick.metric)})")
    else:
        against = (f" (p={pick.p:.3f} against the runner-up {pick.runner_up.label}, "
                   f"{_runs([leader, pick.runner_up], pick.metric)})")
    return f"{title}: {leader.label} at {value}{against}{_from_limit(leader, reference)}"


def _tolerance(metric: str) -> str:
    """How close a counted figure must be to the lowest to tie with it (analysis.pick)."""
    if metric in analysis.BYTE_METRICS:
        return (f"within {analysis.LEAN_TOLERANCE_BYTES:g}B or "
                f"{analysis.LEAN_TOLERANCE_FRACTION:.0%} of the lowest")
    return "the same count"


def counted_line(tables: list[analysis.Table]) -> str:
    """What the counted columns rest on, for the head of a report that shows one ("" if none)."""
    shown = [metric.header for metric in (m.ALLOCS, m.BYTES)
             if any(metric in t.metrics for t in tables)]
    if not shown:
        return ""
    return (f"{' and '.join(shown)}: counted in one process per row (the heap counter "
            "preloaded), one value a row however many runs it timed: deltas show the change "
            f"{COUNTED_ONCE}, with no p-value")


def _held_text(row: analysis.AnalyzedRow) -> str:
    ratio = row.median("held_over_live")
    return (m.format_bytes(row.median("peak_held_bytes")) + " peak held"
            + (f", {m.format_times(ratio)} live" if ratio is not None else ""))


def verdict_lines(table: analysis.Table) -> list[str]:
    """A few plain sentences: the fastest, the leanest, how far each is from the limit, and
    what the reader must know to trust them (a noisy reference, rows left out)."""
    if table.comparing:
        return compare_verdict_lines(table)
    v = analysis.verdict(table)
    lines = []
    if v.fastest:
        lines.append(_pick_line("fastest", v.fastest,
                                m.format_time(v.fastest.leader.median("ns_per_op")) + "/op",
                                v.reference))
    if v.leanest:
        lines.append(_pick_line("leanest", v.leanest, _held_text(v.leanest.leader), None))
    if v.fewest_bytes:
        lines.append(_pick_line(
            "fewest heap B/op", v.fewest_bytes,
            m.format_bytes(v.fewest_bytes.leader.median("bytes_per_op")) + "/op", None))
    if v.pareto and v.leanest:
        lines.append("time vs peak held, no row beats these in both: " + _names(v.pareto))
    if v.best_preload:
        lines.append(_pick_line(
            "best process allocator", v.best_preload,
            m.format_time(v.best_preload.leader.median("ns_per_op")) + "/op", v.reference))
    rival = rival_verdict_line(table)
    return lines + ([rival] if rival else []) + note_lines(table, v)


def note_lines(table: analysis.Table, v: analysis.Verdict | None = None) -> list[str]:
    """What the verdicts rest on: a noisy reference, rows left out, how held was measured."""
    v = v or analysis.verdict(table)
    notes = []
    if v.noisy_reference and v.reference:
        n = v.noisy_reference
        notes.append(f"note: the reference {v.reference.label} is noisier (±"
                     f"{n.reference_spread * 100:.0f}%) than the rows it judges (median ±"
                     f"{n.rows_spread * 100:.0f}%): its 'vs {v.reference.label}' ratios are "
                     "unreliable; rerun with more --repetitions")
    if v.excluded:
        reasons = sorted({analysis.EXCLUDED_FROM_VERDICTS[
            results.strategy_base(r.key.strategy)] for r in v.excluded})
        notes.append(f"note: {_names(v.excluded)} left out of the verdicts "
                     f"({'; '.join(reasons)})")
    preloaded = sorted({r.key.strategy for r in table.rows if r.role == "preload"})
    if preloaded:
        notes.append(f"note: preload rows run the {', '.join(preloaded)} strategy with the "
                     "process allocator replaced by LD_PRELOAD")
    unmeasured = [r for r in table.rows if r.values(results.HELD_UNMEASURED)]
    if unmeasured:
        notes.append(f"note: peak held unmeasured for {_names(unmeasured)}: it read below peak "
                     "live, so the probe missed memory the allocator held before the row; left "
                     "out of the leanest verdict and the time-vs-held front")
    methods: dict[str, list[str]] = {}
    for row in table.rows:
        if row.held_method and row.median("peak_held_bytes") is not None:
            who = row.key.strategy or row.label
            if row.key.preload:
                who += f" [preload={row.key.preload}]"
            names = methods.setdefault(row.held_method, [])
            if who not in names:
                names.append(who)
    if methods:
        notes.append("peak held measured by: " + "; ".join(
            f"{method} ({', '.join(names)})" for method, names in methods.items()))
    return notes


def phase_grid(table: analysis.Table) -> Grid | None:
    """The phase table of a phase workload (AllocPhases): held and held/live at each phase's
    end, per row; None for other workloads."""
    phases = table.phases
    rows = [r for r in table.rows if r.phases]
    if not phases or not rows:
        return None
    headers, numeric = ["strategy/variant"], [False]
    for phase in phases:
        headers += [f"{phase} held", f"{phase} held/live"]
        numeric += [True, True]
    cells = []
    for row in rows:
        line = [row.label]
        for phase in phases:
            line.append(format_value(m.PEAK_HELD,
                                     row.summary.get(results.phase_metric(phase, "held"))))
            line.append(format_value(m.HELD_OVER_LIVE, row.summary.get(
                results.phase_metric(phase, "held_over_live"))))
        cells.append(line)
    return Grid(headers, cells, numeric, [0] * len(headers), [r.role for r in rows])


def compare_verdict_lines(table: analysis.Table) -> list[str]:
    """How many rows' time/op the U test calls faster, slower or unchanged; a row in one run
    only, or with too few runs on a side to test, is untested, not unchanged."""
    faster = slower = same = untested = 0
    for row in table.rows:
        d = row.delta.get("ns_per_op")
        if d is None or d.p is None:
            untested += 1
        elif not d.significant:
            same += 1
        elif d.new_larger is False:  # the test's direction, not the medians' (stats.Delta)
            faster += 1
        else:
            slower += 1
    untested_text = (f", {untested} untested (in one run only, or under "
                     f"{stats.MIN_SAMPLES} runs a side)" if untested else "")
    lines = [f"time/op: {faster} faster, {slower} slower, {same} unchanged "
             f"(p >= {stats.ALPHA}){untested_text}"]
    return lines + [line for line in (rival_verdict_line(table, old=True),
                                      rival_verdict_line(table)) if line]


def render_table(table: analysis.Table) -> str:
    parts = [caption(table), render(grid(table), "  ")]
    parts += ["  " + line for line in verdict_lines(table)]
    phases = phase_grid(table)
    if phases and not table.comparing:
        parts += ["  at the end of each phase (medians):", render(phases, "  ")]
    return "\n".join(parts)


def heap_state_line(context: dict) -> str:
    """Which heap state the figures come from, for the head of the report ("" if unnamed)."""
    state = context.get(results.HEAP_STATE_FIELD, "")
    if not state:
        return ""
    line = f"heap state: {state}"
    background = float(context.get(results.HEAP_BACKGROUND_FIELD, 0) or 0)
    if state == results.WARM and background:
        line += (f" (every row ran beside a {m.format_bytes(background)} live background set, "
                 "as in a long-running process)")
    elif state == results.IDLE:
        line += " (nothing else live on the heap)"
    idle_runs = context.get(IDLE_REPETITIONS_FIELD)
    if state == results.WARM and idle_runs:
        line += (f"; idle time/op: the same row in a process with nothing else on its heap, "
                 f"{idle_runs} runs each (fresh rows and allocator patterns); verdicts are "
                 "on the warm figures")
    return line


# In the context of a run whose fresh rows and patterns also ran idle: their repetitions.
IDLE_REPETITIONS_FIELD = "pmrkit_idle_repetitions"


def render_all(tables: list[analysis.Table], context: dict | None = None) -> str:
    head = "\n".join(line for line in (heap_state_line(context or {}), counted_line(tables),
                                        rival_line(tables), *rival_tally_lines(tables))
                     if line)
    return ((head + "\n\n" if head else "")
            + "\n\n".join(render_table(t) for t in tables) + "\n")
