#!/usr/bin/python3
"""The whole report pipeline on the real pmrkit_bench, in --quick mode on one strategy.

    test_pipeline.py --bench build/bench/pmrkit_bench [--strategy std_unsync_pool]
                     [--preload jemalloc] [--workdir DIR]

Runs bench/report/run.py, then checks what a user gets: the progress lines (one per run), one
table per workload with the documented columns and a baseline row, results.json (parses, holds
the strategy's rows, the new_delete baseline rows and the reference rows, the preload rows
tagged and run on malloc), summary.csv (header and one row per table row), report.html (every
table and every chart embedded) and charts/*.png; then compare.py on the run against itself,
which must find no significant change anywhere. A binary with the malloc strategy (issue 11 on)
must report peak held and peak live for every row, which the tables, CSV and charts then show.
Every row runs in the warm heap state (a live background set of tens of MiB, named in the
context, the report's head, the captions and the CSV), the fresh rows and patterns also idle,
whose time stands beside the warm one in the tables and the CSV. After the tables, each
container workload's ops in one process (pmrkit_interleaved): the strategy and the baseline,
pooled and fresh (and the strategy's shared rows, where it has them), against mimalloc_plain,
in the text, results.json and report.html.
Timings are never asserted: machines are shared and noisy.
"""

import argparse
import csv
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
REPORT = os.path.normpath(os.path.join(HERE, "..", "..", "bench", "report"))
sys.path.insert(0, REPORT)

import results  # noqa: E402
import summary_csv  # noqa: E402

failures = []


def check(condition, message):
    if not condition:
        failures.append(message)
    return condition


def run_pipeline(args, out):
    command = [sys.executable, os.path.join(REPORT, "run.py"), "--bench", args.bench,
               "--out", out, "--quick", "--strategy", args.strategy]
    for tag in args.preload:
        command += ["--preload", tag]
    for workload in args.workload:
        command += ["--workload", workload]
    env = dict(os.environ)
    env.pop("PMRKIT_STRATEGY", None)
    done = subprocess.run(command, capture_output=True, text=True, timeout=args.timeout,
                          env=env)
    if done.returncode != 0:
        print(done.stdout[-4000:], done.stderr[-4000:], sep="\n", file=sys.stderr)
        raise SystemExit(f"FAIL: run.py exited {done.returncode}")
    return done.stdout, done.stderr


def check_progress(stderr):
    lines = [l for l in stderr.splitlines() if re.match(r"^\[\d+/\d+\] ", l)]
    if not check(lines, "no progress lines on stderr"):
        return 0
    total = int(re.match(r"^\[1/(\d+)\] ", lines[0]).group(1))
    check(len(lines) == total, f"{len(lines)} progress lines for {total} benchmarks")
    check(all("left)" in l for l in lines), "a progress line without the estimated time left")
    check(f"ran {total} of {total} benchmark runs" in stderr, "no closing 'ran N of N' line")
    return total


def tables_with(bench, strategy, workloads=()):
    """The tables in which the binary runs `strategy` (not every strategy runs every pattern:
    threads:2 needs a thread-safe one, AllocMixed one that reuses memory)."""
    listed = subprocess.run([bench, "--benchmark_list_tests=true", f"--strategy={strategy}"],
                            capture_output=True, text=True, timeout=60, check=True).stdout
    keys = [results.parse_name(n.strip()) for n in listed.splitlines() if n.strip()]
    return {k.workload + (f" threads:{k.threads}" if k.threads != 1 else "")
            for k in keys if k.strategy == strategy
            and (not workloads or k.workload.split("/", 1)[0] in workloads)}


def cells(row):
    return re.split(r"\s{2,}", row.strip())


# The lines after a table's rows: verdicts, notes, the phase table.
AFTER_ROWS = re.compile(r"^  (fastest|leanest|fewest heap B/op|time vs peak held|"
                        r"best process allocator|note|peak held measured by|"
                        r"at the end of each phase)\b")


IN_PROCESS_TITLE = re.compile(r"^Container(\w+) in one process — (\d+) rounds ")


def has_shared_rows(bench, strategy):
    """Whether the binary runs `strategy`'s container ops as arenas over a long-lived pool
    (/shared rows: the strategies that take their memory from an upstream)."""
    listed = subprocess.run([bench, "--benchmark_list_tests=true", f"--strategy={strategy}"],
                            capture_output=True, text=True, timeout=60, check=True).stdout
    keys = [results.parse_name(n.strip()) for n in listed.splitlines() if n.strip()]
    return any(k.strategy == strategy and k.variant == "shared" for k in keys)


def check_in_process(out, stdout, strategy, workloads, shared):
    """The container ops in one process: one table per container workload of the run, the
    reference mimalloc_plain's row with its times, then the strategy and the baseline (and
    malloc, with preload rows), each pooled and fresh (the strategy also shared, when `shared`),
    with a ratio, (rounds faster / rounds) and p per phase; the same in results.json's context
    and in report.html."""
    wanted = ([w[len("Container"):] for w in workloads if w.startswith("Container")]
              if workloads else ["UnorderedMap", "Map", "Document"])
    blocks = [b for b in stdout.strip().split("\n\n") if IN_PROCESS_TITLE.search(b)]
    found = [IN_PROCESS_TITLE.search(b).group(1) for b in blocks]
    check(found == wanted, f"in-process tables for {found}, want {wanted}")
    subjects = (["mimalloc_plain/pooled", f"{strategy}/pooled", f"{strategy}/fresh"]
                + ([f"{strategy}/shared"] if shared else [])
                + ["new_delete/pooled", "new_delete/fresh"])
    for block in blocks:
        rounds = IN_PROCESS_TITLE.search(block).group(2)
        lines = block.splitlines()
        check(lines[1].split() == ["strategy/variant", "build", "read", "destroy"],
              f"in-process columns {lines[1]}")
        rows = lines[3:]
        # With preload rows, the plain malloc rows they replace the allocator of run too.
        names = [r.split()[0] for r in rows]
        check(names[:len(subjects)] == subjects
              and set(names[len(subjects):]) <= {"malloc/pooled", "malloc/fresh"},
              f"in-process rows {names}")
        check(rows and len(re.findall(r"\d(\.\d+)?[mun]?s\b", rows[0])) == 3,
              f"the reference's row shows no times: {rows[:1]}")
        ratio = rf"\d+\.\d{{3}} \(\d+/{rounds}\) p=\d\.\d{{3}}"
        check(all(len(re.findall(ratio, r)) == 3 for r in rows[1:]),
              f"an in-process row without three ratios: {rows[1:]}")
    with open(os.path.join(out, "results.json"), encoding="utf-8") as f:
        kept = json.load(f)["context"].get("pmrkit_containers_in_one_process", {})
    check([w["name"] for w in kept.get("workloads", [])] == wanted,
          "results.json's context lacks the in-process results")
    with open(os.path.join(out, "containers_in_one_process.csv"), newline="",
              encoding="utf-8") as f:
        records = list(csv.DictReader(f))
    rows_shown = sum(len(b.splitlines()) - 3 for b in blocks)
    check(len(records) == 3 * rows_shown,
          f"containers_in_one_process.csv: {len(records)} rows for {rows_shown} table rows")
    check(all(r["ratio_to_reference"] for r in records if r["strategy"] != "mimalloc_plain"),
          "containers_in_one_process.csv: a subject's row without its ratio")
    with open(os.path.join(out, "report.html"), encoding="utf-8") as f:
        page = f.read()
    for workload in wanted:
        check(f">Container{workload} in one process</h2>" in page,
              f"report.html lacks Container{workload} in one process")


def check_tables(stdout, strategy, expected_tables, memory):
    blocks = [b for b in stdout.strip().split("\n\n") if b.strip()]
    check(blocks and blocks[0].startswith("heap state: warm (every row ran beside a "),
          f"the report does not start by naming the heap state: {blocks[:1]}")
    # The container ops in one process come after the main tables (check_in_process).
    blocks = [b for b in blocks[1:] if IN_PROCESS_TITLE.search(b.splitlines()[0]) is None]
    check(blocks, "no tables printed")
    titles = []
    for block in blocks:
        lines = block.splitlines()
        title = lines[0].split(" — ")[0]
        titles.append(title)
        check(", warm heap" in lines[0], f"{title}: caption does not name the heap state")
        header = lines[1].split()
        want = ["strategy/variant", "time/op", "vs", "base", "idle", "time/op", "allocs/op",
                "vs", "base", "B/op", "vs", "base"]
        if title.startswith("Container") and " threads:" in title:
            del want[4:6]  # no "idle time/op": the container rows on every core take no idle run
        check(header[:len(want)] == want, f"{title}: columns {header}")
        check(set(lines[2].replace(" ", "")) == {"-"}, f"{title}: no rule under the header")
        rows = []
        for line in lines[3:]:
            if AFTER_ROWS.match(line):
                break
            rows.append(line)
        if memory:
            check("peak held" in lines[1] and "held/live" in lines[1],
                  f"{title}: no memory columns: {lines[1]}")
            # Only the memory columns (rows that are not run idle show "—" under idle time/op),
            # and a held figure may be missing only where the report says the measurement failed.
            memory_from = lines[1].index("peak held") - 2
            unmeasured = " ".join(l for l in lines if l.startswith("  note: peak held unmeasured"))
            check(not any(" — " in r[memory_from:] and r.split("  ")[1].strip() not in unmeasured
                          for r in rows), f"{title}: a row without a memory figure and no note")
            check(any(l.startswith("  leanest: ") for l in lines), f"{title}: no leanest verdict")
        check(not any(l.startswith("  fastest: checked") for l in lines),
              f"{title}: the debugging strategy crowned")
        labels = [r.split()[0] for r in rows]
        is_pattern = title.startswith("Alloc")
        base = "new_delete" if is_pattern else "new_delete/fresh"
        check(labels and labels[0] == base, f"{title}: first row {labels[:1]}, want {base}")
        check(rows and rows[0].count(" base") >= 3, f"{title}: baseline row lacks 'base' cells")
        has_strategy = any(l.split("/")[0] == strategy for l in labels)
        check(has_strategy == (title in expected_tables),
              f"{title}: {strategy} row {'unexpected' if has_strategy else 'missing'}: {labels}")
        # Where the table has the rival's rows, every other row ends with its round-by-round
        # ratio to them (3 rounds in --quick), after the reference ratio.
        rival = "vs mimalloc_plain" in lines[1]
        paired = r"\d+\.\d\dx \(\d/3\)"
        if "vs limit" in lines[1] or "vs bare_list" in lines[1]:
            check(re.search(r"\d+\.\d\dx" + (r"\s+" + paired if rival else "") + "$", rows[-1])
                  is not None, f"{title}: reference row without its ratios: {rows[-1]!r}")
        if rival:
            for row in rows:
                if row.split()[0].split("/")[0] != "mimalloc_plain":
                    check(re.search(paired + "$", row) is not None,
                          f"{title}: a row without its ratio to mimalloc_plain: {row!r}")
        check(any(l.startswith("  fastest: ") for l in lines), f"{title}: no verdict")
        # --quick has 3 repetitions: with distinct timings the exact U test cannot reach
        # p < 0.05 (its smallest p for 3+3 is 0.1), so no time delta may be called.
        for row in rows[1:]:
            check(cells(row)[2].startswith("~ (p="), f"{title}: time delta called at n=3: {row}")
            # allocs/op and B/op come from one counting process: a change, never a p-value.
            check(row.count("(counted once)") == 2 or " — " in row,
                  f"{title}: allocs/op and B/op deltas not marked as one count: {row}")
    return titles


def check_files(out, strategy, titles, preloads, memory, stdout=""):
    with open(os.path.join(out, "results.json"), encoding="utf-8") as f:
        doc = json.load(f)
    entries = doc["benchmarks"]
    check(entries, "results.json has no benchmarks")
    check(all("real_time" in e and "time_unit" in e for e in entries), "entry without real_time")
    check(all("allocs_per_op" in e and "bytes_per_op" in e for e in entries
              if e.get("run_type") == "iteration" and not e.get("error_occurred")),
          "an iteration without allocs_per_op / bytes_per_op")
    keys = [results.parse_name(results.run_name_of(e), preload=e.get(results.PRELOAD_FIELD, ""))
            for e in entries]
    check(any(k.strategy == strategy for k in keys), f"no {strategy} rows in results.json")
    check(any(k.strategy == "new_delete" and not k.preload for k in keys), "no baseline rows")
    check(any(k.is_reference for k in keys), "no limit/bare_list rows")
    allowed = ("", strategy, "new_delete", "malloc", "bare_list", *results.PLAIN_WRAPPERS)
    check(not any(k.strategy not in allowed for k in keys),
          "rows of other strategies in a narrowed run")
    preload_on = "malloc" if memory else "new_delete"
    for tag in preloads:
        tagged = [e for e in entries if e.get(results.PRELOAD_FIELD) == tag
                  and e.get("run_type") == "iteration"]
        check(tagged and all(e["name"].endswith(f"[preload={tag}]") for e in tagged),
              f"preload {tag}: rows missing or untagged")
        check(all(f"/{preload_on}" in e["name"] for e in tagged),
              f"preload {tag}: rows not on {preload_on}")
    iterations = [e for e in entries
                  if e.get("run_type") == "iteration" and not e.get("error_occurred")]
    if memory:
        check(all("peak_held_bytes" in e and "peak_live_bytes" in e for e in iterations),
              "an iteration without peak_held_bytes / peak_live_bytes")
    phases = tuple(dict.fromkeys(p for e in iterations for p in results.phase_names(e)))

    with open(os.path.join(out, "summary.csv"), newline="", encoding="utf-8") as f:
        reader = csv.DictReader(f)
        check(reader.fieldnames == summary_csv.header(phases=phases),
              f"CSV header {reader.fieldnames}")
        records = list(reader)
    check(len({(r["workload"], r["threads"]) for r in records}) == len(titles),
          "CSV tables differ from printed tables")
    check(all(float(r["ns_per_op_median"]) > 0 for r in records), "CSV row without a time")
    check({r["heap_state"] for r in records} == {"warm"}, "CSV rows not all in the warm state")
    # The threaded container rows take no idle run (runner.idle_jobs); every other baseline does.
    def threaded_container(r):
        return r["threads"] != "1" and r["workload"].startswith("Container")

    all_baselines = [r for r in records if r["role"] == "baseline"]
    baselines = [r for r in all_baselines if not threaded_container(r)]
    check(baselines and all(float(r["idle_ns_per_op_median"]) > 0 for r in baselines),
          "a baseline row without its idle time in the CSV")
    threaded_baselines = [r for r in all_baselines if threaded_container(r)]
    has_containers = any(r["workload"].startswith("Container") for r in records)
    check(threaded_baselines or not has_containers,
          "no baseline row for the container rows on every core")
    check(all(r["idle_ns_per_op_median"] == "" for r in threaded_baselines),
          "a threaded container row with an idle time")
    check(all(r["role"] in ("baseline", "strategy", "preload", "plain", "reference")
              for r in records), "CSV row with an unknown role")
    if memory:
        noted = re.findall(r"note: peak held unmeasured for (.*?): it read", stdout)
        unmeasured = {label for names in noted for label in names.split(", ")}
        check(all(r["peak_held_bytes"] and r["held_over_live"] for r in records
                  if r["label"] not in unmeasured),
              "CSV row without peak_held_bytes / held_over_live")
        check(any(r["pareto"] == "yes" for r in records), "CSV marks no Pareto-optimal row")

    with open(os.path.join(out, "report.html"), encoding="utf-8") as f:
        page = f.read()
    images = page.count('src="data:image/png;base64,')
    chart_files = [n for n in os.listdir(os.path.join(out, "charts")) if n.endswith(".png")]
    check(images >= len(titles), f"report.html embeds {images} charts for {len(titles)} tables")
    check(images == len(chart_files), f"{images} embedded charts, {len(chart_files)} PNG files")
    check(any(n.startswith("thread_scaling_") for n in chart_files), "no thread-scaling chart")
    if memory:
        memory_charts = [n for n in chart_files if n.startswith("memory_")]
        check(len(memory_charts) == len(titles),
              f"{len(memory_charts)} time-vs-held charts for {len(titles)} tables")
    for name in chart_files:
        with open(os.path.join(out, "charts", name), "rb") as f:
            check(f.read(8) == b"\x89PNG\r\n\x1a\n", f"charts/{name} is not a PNG")
    for title in titles:
        check(f">{title}</h2>" in page, f"report.html lacks the {title} section")
    check("<link" not in page and "<script src" not in page, "report.html is not standalone")


def check_compare(out):
    results_json = os.path.join(out, "results.json")
    done = subprocess.run([sys.executable, os.path.join(REPORT, "compare.py"), results_json,
                           results_json], capture_output=True, text=True, timeout=60)
    check(done.returncode == 0, f"compare.py exited {done.returncode}: {done.stderr[-500:]}")
    check("old time/op" in done.stdout and "new time/op" in done.stdout, "compare.py columns")
    check(not re.search(r"[+-]\d+\.\d\d% \(p=", done.stdout),
          "compare.py found a change between a run and itself")
    # The container ops in one process, OLD -> NEW: the same ratios, and no change called; a
    # quick run has one process a strategy, too few to test (in_process.py).
    block = re.search(r"^ContainerMap in one process — .*?(?:\n\n|\Z)", done.stdout,
                      re.M | re.S)
    if check(block is not None, "compare.py lacks the container ops in one process"):
        cells = re.findall(r"(\d\.\d{3}) → (\d\.\d{3}) (\S+)", block.group(0))
        check(cells and all(a == b and mark == "untested" for a, b, mark in cells),
              f"compare.py: a run against itself in one process: {cells}")


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--bench", required=True)
    p.add_argument("--strategy", default="std_unsync_pool")
    p.add_argument("--preload", action="append", default=[],
                   help="also run these preload rows (skipped if the library is missing)")
    p.add_argument("--workdir", help="keep the run's files here (default: a temporary dir)")
    p.add_argument("--timeout", type=float, default=200)
    p.add_argument("--workload", action="append", default=[],
                   help="only these workloads (repeatable); default: all")
    args = p.parse_args()
    import runner
    libraries = {tag: path for tag, path, _ in runner.PRELOADS}
    args.preload = [t for t in args.preload if os.path.exists(libraries.get(t, ""))]

    out = args.workdir or tempfile.mkdtemp(prefix="pmrkit-report-test-")
    if args.workdir:
        shutil.rmtree(out, ignore_errors=True)
    try:
        # From issue 11 on (the malloc strategy), the binary reports the memory counters.
        memory = "malloc" in runner.strategy_names(args.bench)
        stdout, stderr = run_pipeline(args, out)
        total = check_progress(stderr)
        titles = check_tables(stdout, args.strategy,
                              tables_with(args.bench, args.strategy, args.workload), memory)
        check_files(out, args.strategy, titles, args.preload, memory, stdout)
        check_in_process(out, stdout, args.strategy, args.workload,
                         has_shared_rows(args.bench, args.strategy))
        check_compare(out)
    finally:
        if not args.workdir:
            shutil.rmtree(out, ignore_errors=True)
    for f in failures:
        print("FAIL:", f)
    if failures:
        return 1
    print(f"ok: {total} benchmark runs, {len(titles)} tables ({', '.join(titles)})"
          + ("" if memory else "; this binary predates the memory counters"))
    return 0


if __name__ == "__main__":
    sys.exit(main())
