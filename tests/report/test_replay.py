#!/usr/bin/python3
"""The replay report (bench/report/replay.py) and pmrkit-replay's JSON.

    test_replay.py [--replay build/trace/pmrkit-replay --trace tests/trace/data/X.trace] [-v]

Always: the recommendation rule on fixed numbers. With --replay and --trace: the shape of
`pmrkit-replay --json` (read back by results.from_json as the report reads it), and replay.py
end to end on the trace in --quick mode with a few strategies: its tables, results.json,
summary.csv, report.html, charts, and recommendation lines whose specs pmrkit-replay accepts
(it makes them with make_resource). Timings are never asserted.
"""

import argparse
import csv
import json
import os
import re
import subprocess
import sys
import tempfile
import unittest

HERE = os.path.dirname(os.path.abspath(__file__))
REPORT = os.path.normpath(os.path.join(HERE, "..", "..", "bench", "report"))
sys.path.insert(0, REPORT)

import analysis  # noqa: E402
import replay  # noqa: E402
import results  # noqa: E402
import runner  # noqa: E402

REPLAY = TRACE = None
WORKLOAD = "Replay_t"


def entry(spec, ns, held=None, live=1000, index=0, label=""):
    e = {"name": f"{WORKLOAD}/{spec}", "run_name": f"{WORKLOAD}/{spec}", "run_type": "iteration",
         "repetition_index": index, "real_time": ns, "cpu_time": ns, "time_unit": "ns",
         "peak_live_bytes": live}
    if held is not None:
        e["peak_held_bytes"] = held
    if label:
        e["label"] = label
    return e


def table_of(rows):
    """rows: (spec, ns/op, peak held or None); two identical repetitions each, plus limit."""
    known = ("new_delete", "malloc", "monotonic", "size_class", "checked")
    entries = [entry("limit", 2.0, index=i) for i in range(2)]
    for spec, ns, held in rows:
        entries += [entry(spec, ns, held, index=i) for i in range(2)]
    doc = {"context": {results.STRATEGIES_FIELD: list(known)}, "benchmarks": entries}
    return analysis.analyze_run(results.from_json(doc, known))[0]


class Recommendation(unittest.TestCase):
    def test_rule_on_fixed_numbers(self):
        # Front (leanest first): new_delete (40ns, 1000B), size_class:max_pooled=4K (20ns,
        # 1500B), size_class (10ns, 4000B), monotonic (5ns, 20000B); malloc (50ns, 3000B) is
        # beaten by size_class:max_pooled=4K in both. Scores against the best time 5 and the
        # best held 1000: 8.0, 6.0, 8.0, 20.0 -> size_class:max_pooled=4K.
        table = table_of([("new_delete", 40.0, 1000), ("malloc", 50.0, 3000),
                          ("size_class:max_pooled=4K", 20.0, 1500), ("size_class", 10.0, 4000),
                          ("monotonic", 5.0, 20000), ("checked", 1.0, 10)])
        rec = replay.recommend(table)
        self.assertEqual(rec.fastest.key.strategy, "monotonic")  # checked is never a candidate
        self.assertEqual(rec.leanest.key.strategy, "new_delete")
        self.assertEqual([r.key.strategy for r in rec.front],
                         ["new_delete", "size_class:max_pooled=4K", "size_class", "monotonic"])
        self.assertEqual(rec.scores["size_class:max_pooled=4K"], 6.0)
        self.assertEqual(rec.scores["monotonic"], 20.0)
        self.assertEqual(rec.trade_off.key.strategy, "size_class:max_pooled=4K")
        lines = replay.recommendation_lines(rec)
        self.assertIn("recommended trade-off: PMRKIT_STRATEGY='size_class:max_pooled=4K'",
                      "\n".join(lines))
        self.assertNotIn("one_thread", "\n".join(lines))
        # A pick the plain install_default_from_env() refuses says how to install it.
        lines = replay.recommendation_lines(rec, ["monotonic", "boost_pool"])
        note = [line for line in lines if "one_thread" in line]
        self.assertEqual(len(note), 1, lines)
        self.assertIn("(monotonic: only for a program that allocates from one thread", note[0])
        self.assertIn("default_resource_users::one_thread", note[0])

    def test_strategies_left_out_are_not_picked(self):
        # A trace of threads that took turns runs the single-threaded strategies too; a program
        # with several threads cannot install them as its default.
        table = table_of([("new_delete", 40.0, 1000), ("std_unsync_pool", 5.0, 500),
                          ("size_class", 10.0, 2000)])
        self.assertEqual(replay.recommend(table).fastest.key.strategy, "std_unsync_pool")
        rec = replay.recommend(table, ["std_unsync_pool", "mimalloc_heap"])
        self.assertEqual((rec.fastest.key.strategy, rec.leanest.key.strategy),
                         ("size_class", "new_delete"))

    def test_tied_score_goes_to_the_faster(self):
        # Both score 2.0 (twice the best held at the best time; the best held at twice the time).
        table = table_of([("new_delete", 20.0, 1000), ("size_class", 10.0, 2000)])
        self.assertEqual(replay.recommend(table).trade_off.key.strategy, "size_class")

    def test_rows_without_held_are_fast_but_not_traded(self):
        table = table_of([("new_delete", 20.0, 1000), ("malloc", 5.0, None)])
        rec = replay.recommend(table)
        self.assertEqual(rec.fastest.key.strategy, "malloc")
        self.assertEqual(rec.trade_off.key.strategy, "new_delete")

    def test_sweep_specs_are_size_class_specs(self):
        specs = replay.sweep_specs()
        self.assertTrue(6 <= len(specs) <= 10)
        self.assertTrue(all(s.startswith("size_class:") for s in specs))

    def test_plan_adds_baseline_limit_and_preloads(self):
        jobs, notes = replay.plan(["new_delete", "malloc", "size_class"], ["size_class"],
                                  sweep=False, preloads=[t for t, _, _ in runner.PRELOADS])
        specs = [(j.args[0], j.preload) for j in jobs]
        self.assertEqual(specs[:3], [("limit", ""), ("new_delete", ""), ("size_class", "")])
        for tag, path, _ in runner.PRELOADS:
            self.assertEqual(("malloc", tag) in specs, os.path.exists(path), tag)
            self.assertEqual(any(tag in n for n in notes), not os.path.exists(path), tag)


def replay_json(*args):
    done = subprocess.run([REPLAY, TRACE, "--json", "-", *args], capture_output=True, text=True,
                          timeout=300)
    return done, (json.loads(done.stdout) if done.returncode == 0 else None)


def needs_binary():
    if not REPLAY:
        raise unittest.SkipTest("needs --replay and --trace")


class ReplayJson(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        needs_binary()

    def test_shape(self):
        done, doc = replay_json("--strategy", "new_delete", "--strategy", "size_class",
                                "--repetitions", "2")
        self.assertEqual(done.returncode, 0, done.stderr)
        self.assertIn("peak held B", done.stderr)  # the plain table moved to stderr
        names = [e["name"] for e in doc["benchmarks"]]
        label = re.sub(r"\..*$", "", os.path.basename(TRACE))
        self.assertEqual(names, [f"Replay_{label}/{s}" for s in
                                 ("limit", "limit", "new_delete", "new_delete", "size_class",
                                  "size_class")])
        for e in doc["benchmarks"]:
            self.assertEqual((e["run_type"], e["time_unit"], e["repetitions"]),
                             ("iteration", "ns", 2))
            self.assertGreater(e["real_time"], 0)
            self.assertEqual(e["iterations"], doc["context"]["pmrkit_trace_operations"])
            self.assertEqual(e["peak_live_bytes"], doc["context"]["pmrkit_trace_peak_live_bytes"])
        self.assertEqual([e["repetition_index"] for e in doc["benchmarks"]], [0, 1] * 3)
        by_name = {e["name"].split("/")[1]: e for e in doc["benchmarks"]}
        self.assertNotIn("peak_held_bytes", by_name["limit"])
        # new_delete takes no upstream: its held figure comes from glibc (mallinfo2).
        self.assertEqual(by_name["new_delete"]["label"], "held=mallinfo2")
        self.assertEqual(by_name["size_class"]["label"], "held=upstream")
        for spec in ("new_delete", "size_class"):
            self.assertGreaterEqual(by_name[spec]["peak_held_bytes"],
                                    by_name[spec]["peak_live_bytes"], spec)
        rows = results.from_json(doc, ("new_delete", "size_class")).rows
        keys = {(k.strategy, k.variant) for k in rows}
        self.assertEqual(keys, {("", "limit"), ("new_delete", ""), ("size_class", "")})
        self.assertEqual(rows[next(k for k in rows if k.strategy == "new_delete")].held_method,
                         "mallinfo2")
        one_thread = doc["context"]["pmrkit_one_thread_strategies"]
        self.assertIn("std_unsync_pool", one_thread)
        self.assertIn("mimalloc_heap", one_thread)
        self.assertNotIn("size_class", one_thread)

    def test_list_and_bad_spec(self):
        listed = subprocess.run([REPLAY, TRACE, "--list-strategies"], capture_output=True,
                                text=True, timeout=300)
        self.assertIn("size_class", listed.stdout.split())
        done, _ = replay_json("--strategy", "size_class:no_such_option=1", "--no-limit")
        self.assertNotEqual(done.returncode, 0)
        self.assertIn("no_such_option", done.stdout + done.stderr)


class EndToEnd(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        needs_binary()
        cls.workdir = tempfile.TemporaryDirectory(prefix="pmrkit-replay-test-")
        cls.out = cls.workdir.name
        command = [sys.executable, os.path.join(REPORT, "replay.py"), TRACE, "--replay", REPLAY,
                   "--out", cls.out, "--quick", "--repetitions", "2", "--strategy", "size_class",
                   "--strategy", "size_class:max_pooled=4K", "--preload", "jemalloc"]
        cls.done = subprocess.run(command, capture_output=True, text=True, timeout=600)

    @classmethod
    def tearDownClass(cls):
        cls.workdir.cleanup()

    def test_runs(self):
        self.assertEqual(self.done.returncode, 0, self.done.stderr[-3000:])

    def test_table(self):
        text = self.done.stdout
        self.assertRegex(text, r"Replay_\S+ — baseline new_delete, reference limit, 2 "
                               r"interleaved runs each")
        for label in ("new_delete", "size_class", "size_class:max_pooled=4K", "limit"):
            self.assertRegex(text, rf"(?m)^  {re.escape(label)} +\d", label)
        for header in ("time/op", "peak held", "held/live", "vs limit"):
            self.assertIn(header, text)
        if os.path.exists(dict((t, p) for t, p, _ in runner.PRELOADS)["jemalloc"]):
            self.assertRegex(text, r"(?m)^  malloc \[preload=jemalloc\] +\d")

    def test_csv_html_and_charts(self):
        with open(os.path.join(self.out, "summary.csv"), encoding="utf-8") as f:
            rows = list(csv.DictReader(f))
        labels = {r["label"] for r in rows}
        self.assertTrue({"new_delete", "size_class", "size_class:max_pooled=4K", "limit"}
                        <= labels, labels)
        held = {r["label"]: r["held_method"] for r in rows}
        self.assertEqual((held["new_delete"], held["size_class"]), ("mallinfo2", "upstream"))
        with open(os.path.join(self.out, "report.html"), encoding="utf-8") as f:
            html = f.read()
        self.assertIn("pmrkit replay of", html)
        self.assertIn("recommended trade-off", html)
        charts = os.listdir(os.path.join(self.out, "charts"))
        self.assertTrue(any(c.startswith("memory_Replay_") for c in charts), charts)
        with open(os.path.join(self.out, "results.json"), encoding="utf-8") as f:
            doc = json.load(f)
        self.assertTrue(doc["context"]["pmrkit_interleaved"])

    def test_recommendation_specs_are_valid(self):
        specs = re.findall(r"(?m)^recommended (?:fastest|leanest|trade-off): +"
                           r"PMRKIT_STRATEGY='([^']+)'", self.done.stdout)
        self.assertEqual(len(specs), 3, self.done.stdout[-2000:])
        for spec in set(specs):  # pmrkit-replay makes it with make_resource
            done, doc = replay_json("--strategy", spec, "--no-limit", "--repetitions", "1")
            self.assertEqual(done.returncode, 0, f"{spec}: {done.stderr}")
            self.assertEqual(len(doc["benchmarks"]), 1)


if __name__ == "__main__":
    p = argparse.ArgumentParser()
    p.add_argument("--replay")
    p.add_argument("--trace")
    args, rest = p.parse_known_args()
    if args.replay and args.trace:
        REPLAY, TRACE = os.path.abspath(args.replay), os.path.abspath(args.trace)
    unittest.main(argv=[sys.argv[0]] + rest)
