#!/usr/bin/python3
"""Unit tests of the report code (bench/report): name parsing, JSON reading, statistics,
tables, CSV, HTML; on fixtures/sample_run.json and on the fake benchmark binary.

    /usr/bin/python3 tests/report/test_units.py [-v]
"""

import copy
import csv
import io
import json
import os
import subprocess
import sys
import tempfile
import unittest

HERE = os.path.dirname(os.path.abspath(__file__))
REPORT = os.path.normpath(os.path.join(HERE, "..", "..", "bench", "report"))
FIXTURE = os.path.join(HERE, "fixtures", "sample_run.json")
FAKE_BENCH = os.path.join(HERE, "fixtures", "fake_bench.py")
sys.path.insert(0, REPORT)

import analysis  # noqa: E402
import html_report  # noqa: E402
import charts  # noqa: E402
import results  # noqa: E402
import runner  # noqa: E402
import stats  # noqa: E402
import summary_csv  # noqa: E402
import tables  # noqa: E402
from progress import Progress, format_duration  # noqa: E402


def load_fixture():
    with open(FIXTURE, encoding="utf-8") as f:
        return json.load(f)


def table_of(tables_list, title):
    return next(t for t in tables_list if t.title == title)


def row_of(table, label):
    return next(r for r in table.rows if r.label == label)


class ParseName(unittest.TestCase):
    def check(self, name, workload, strategy, variant, threads=1, preload=""):
        self.assertEqual(results.parse_name(name),
                         results.RowKey(workload, threads, strategy, variant, preload), name)

    def test_workload_rows(self):
        self.check("InsertSingle/new_delete/fresh", "InsertSingle", "new_delete", "fresh")
        self.check("InsertSingle/monotonic/pooled", "InsertSingle", "monotonic", "pooled")
        self.check("InsertSingle/limit", "InsertSingle", "", "limit")

    def test_sub_variant_and_spec(self):
        self.check("Serialization/with_metrics/size_class:max_pooled=128K/fresh",
                   "Serialization/with_metrics", "size_class:max_pooled=128K", "fresh")
        self.check("Serialization/with_metrics/limit", "Serialization/with_metrics", "", "limit")

    def test_strategies_recorded_in_the_context_are_known(self):
        doc = {"context": {results.STRATEGIES_FIELD: ["my_arena"]}, "benchmarks": [
            {"name": "AllocPairs/small/my_arena", "run_type": "iteration", "real_time": 5.0,
             "time_unit": "ns"}]}
        (key,) = results.from_json(doc).rows
        self.assertEqual((key.workload, key.strategy), ("AllocPairs/small", "my_arena"))
        (key,) = results.from_json(doc, known=()).rows  # by position only: the wrong element
        self.assertEqual(key.strategy, "small")

    def test_unknown_strategy_sits_before_its_variant(self):
        self.check("CompressPayload/my_arena/pooled", "CompressPayload", "my_arena", "pooled")

    def test_patterns_and_threads(self):
        self.check("AllocPairs/new_delete", "AllocPairs", "new_delete", "")
        self.check("AllocPairs/bare_list", "AllocPairs", "bare_list", "")
        self.check("AllocMixedShared/std_sync_pool/real_time/threads:2", "AllocMixedShared",
                   "std_sync_pool", "", threads=2)

    def test_run_modifiers_and_preload_tag(self):
        self.check("InsertMultiple/new_delete/fresh/min_time:0.100/repetitions:5",
                   "InsertMultiple", "new_delete", "fresh")
        self.check("InsertMultiple/new_delete/fresh [preload=jemalloc]", "InsertMultiple",
                   "new_delete", "fresh", preload="jemalloc")

    def test_labels_and_roles(self):
        key = results.parse_name("InsertSingle/new_delete/fresh [preload=tcmalloc]")
        self.assertEqual(key.label, "new_delete/fresh [preload=tcmalloc]")
        self.assertTrue(results.parse_name("InsertSingle/limit").is_reference)
        self.assertTrue(results.parse_name("AllocBatch/bare_list").is_reference)
        self.assertFalse(results.parse_name("AllocBatch/new_delete").is_reference)


class ReadJson(unittest.TestCase):
    def setUp(self):
        self.set = results.from_json(load_fixture())

    def test_samples_are_the_repetitions_not_the_aggregates(self):
        row = self.set.rows[results.parse_name("AllocPairs/new_delete")]
        self.assertEqual(row.repetitions, 5)  # the fixture keeps this row's 4 aggregates

    def test_time_units_become_nanoseconds(self):
        row = self.set.rows[results.parse_name("InsertSingle/new_delete/fresh")]
        times = row.values("ns_per_op")
        self.assertTrue(all(800 < v < 1000 for v in times), times)

    def test_counters_and_throughput(self):
        row = self.set.rows[results.parse_name("InsertSingle/new_delete/fresh")]
        self.assertEqual(row.values("allocs_per_op"), [6.0] * 5)
        self.assertEqual(row.values("bytes_per_op"), [700.0] * 5)
        self.assertTrue(all(300 < v < 400 for v in row.values("mb_per_s")))

    def test_errors_are_collected_not_counted(self):
        self.assertEqual([name for name, _ in self.set.errors], ["InsertSingle/boost_pool/fresh"])
        self.assertNotIn(results.parse_name("InsertSingle/boost_pool/fresh"), self.set.rows)

    def test_preload_rows_are_rows_of_their_own(self):
        plain = results.parse_name("InsertSingle/new_delete/fresh")
        tagged = results.RowKey("InsertSingle", 1, "new_delete", "fresh", "jemalloc")
        self.assertIn(tagged, self.set.rows)
        self.assertNotEqual(self.set.rows[plain].values("ns_per_op"),
                            self.set.rows[tagged].values("ns_per_op"))

    def test_aggregates_only_file_gives_one_sample_from_the_mean(self):
        doc = {"benchmarks": [
            {"name": "AllocPairs/new_delete_mean", "run_name": "AllocPairs/new_delete",
             "run_type": "aggregate", "aggregate_name": "mean", "real_time": 10, "time_unit": "ns"},
            {"name": "AllocPairs/new_delete_stddev", "run_name": "AllocPairs/new_delete",
             "run_type": "aggregate", "aggregate_name": "stddev", "real_time": 1,
             "time_unit": "ns"}]}
        row = results.from_json(doc).rows[results.parse_name("AllocPairs/new_delete")]
        self.assertEqual(row.values("ns_per_op"), [10.0])

    def test_merge_keeps_preload_runs_apart(self):
        doc = {"context": {"host_name": "h"}, "benchmarks": [
            {"name": "AllocPairs/new_delete", "run_name": "AllocPairs/new_delete",
             "run_type": "iteration", "real_time": 10, "time_unit": "ns"}]}
        tagged = results.tag_preload(copy.deepcopy(doc), "tcmalloc")
        merged = results.merge([copy.deepcopy(doc), tagged])
        self.assertEqual(merged["context"]["host_name"], "h")
        self.assertEqual([e["name"] for e in merged["benchmarks"]],
                         ["AllocPairs/new_delete", "AllocPairs/new_delete [preload=tcmalloc]"])
        self.assertEqual(len(results.from_json(merged).rows), 2)


class Statistics(unittest.TestCase):
    def test_too_few_samples_are_not_tested(self):
        self.assertIsNone(stats.u_test([1, 2], [3, 4, 5]))
        delta = stats.compare([1, 2], [3, 4, 5])
        self.assertFalse(delta.significant)

    def test_separated_samples_are_significant(self):
        delta = stats.compare([10, 11, 12, 13, 14], [20, 21, 22, 23, 24])
        self.assertTrue(delta.significant)
        self.assertAlmostEqual(delta.change, 10 / 12)
        self.assertAlmostEqual(delta.p, 0.007937, places=5)

    def test_overlapping_samples_are_not(self):
        self.assertFalse(stats.compare([10, 12, 14, 16, 18], [11, 13, 15, 17, 19]).significant)

    def test_identical_constant_samples_have_p_one(self):
        self.assertEqual(stats.u_test([0.0] * 5, [0.0] * 5), 1.0)

    def test_zero_baseline(self):
        self.assertEqual(stats.relative_change(0, 0), 0.0)
        self.assertIsNone(stats.relative_change(0, 5))
        self.assertIsNone(stats.ratio(5, 0))

    def test_summary(self):
        s = stats.summarize([1, 2, 3, 4, 100])
        self.assertEqual((s.n, s.median), (5, 3.0))
        self.assertAlmostEqual(s.spread, (4 - 2) / 2 / 3)
        self.assertIsNone(stats.summarize([]))


class RunTables(unittest.TestCase):
    def setUp(self):
        self.tables = analysis.analyze_run(results.from_json(load_fixture()))

    def test_one_table_per_workload_and_thread_count(self):
        self.assertEqual([t.title for t in self.tables],
                         ["AllocPairs", "AllocMixedShared", "AllocMixedShared threads:2",
                          "InsertSingle", "Serialization/with_metrics"])

    def test_baseline_and_reference(self):
        insert = table_of(self.tables, "InsertSingle")
        self.assertEqual((insert.baseline, insert.reference), ("new_delete/fresh", "limit"))
        pairs = table_of(self.tables, "AllocPairs")
        self.assertEqual((pairs.baseline, pairs.reference), ("new_delete", "bare_list"))

    def test_row_order(self):
        labels = [r.label for r in table_of(self.tables, "InsertSingle").rows]
        self.assertEqual(labels[:3],
                         ["new_delete/fresh", "new_delete/pooled", "std_sync_pool/fresh"])
        self.assertEqual(labels[-2:], ["new_delete/fresh [preload=jemalloc]", "limit"])

    def test_columns(self):
        g = tables.grid(table_of(self.tables, "InsertSingle"))
        self.assertEqual(g.headers, ["strategy/variant", "time/op", "vs base", "allocs/op",
                                     "vs base", "B/op", "vs base", "MB/s", "vs base", "vs limit"])
        # No bytes processed in the patterns: no MB/s columns.
        g = tables.grid(table_of(self.tables, "AllocPairs"))
        self.assertEqual(g.headers, ["strategy/variant", "time/op", "vs base", "allocs/op",
                                     "vs base", "B/op", "vs base", "vs bare_list"])

    def test_cells(self):
        table = table_of(self.tables, "InsertSingle")
        g = tables.grid(table)
        rows = {cells[0]: cells for cells in g.rows}
        base = rows["new_delete/fresh"]
        self.assertEqual([base[i] for i in (2, 4, 6, 8)], ["base"] * 4)
        self.assertEqual(base[3], "6")
        self.assertEqual(base[5], "700B")
        pooled = rows["size_class/pooled"]
        self.assertRegex(pooled[2], r"^-7\d\.\d\d% \(p=0\.008\)$")  # time: significantly less
        self.assertEqual(pooled[4], "-90.00% (p=0.004)")         # allocs 6 -> 0.6
        fresh = rows["size_class/fresh"]
        self.assertEqual(fresh[4], "~ (p=1.000)")                   # same allocs as baseline
        self.assertEqual(rows["limit"][-1], "1.00x")
        self.assertRegex(base[-1], r"^3\.\d\dx$")

    def test_insignificant_and_untestable_deltas(self):
        self.assertEqual(tables.format_delta(stats.Delta(0.1, 0.31, 5, 5)), "~ (p=0.310)")
        self.assertEqual(tables.format_delta(stats.Delta(0.1, None, 1, 1)), "~ (n=1)")
        self.assertEqual(tables.format_delta(stats.Delta(-0.5, 0.008, 5, 5)), "-50.00% (p=0.008)")
        self.assertEqual(tables.format_delta(None), "-")

    def test_verdict(self):
        lines = tables.verdict_lines(table_of(self.tables, "InsertSingle"))
        self.assertTrue(lines[0].startswith("fastest: monotonic/pooled at 180.9ns/op, 0.67x"),
                        lines)
        self.assertTrue(lines[1].startswith("leanest: monotonic/pooled at 14B/op"), lines)
        self.assertIn("limit has 0B/op", lines[1])
        self.assertTrue(lines[2].startswith("best process allocator: new_delete/fresh "
                                            "[preload=jemalloc]"), lines)

    def test_rendered_text_is_aligned(self):
        text = tables.render_table(table_of(self.tables, "AllocPairs"))
        lines = text.splitlines()
        self.assertTrue(lines[0].startswith("AllocPairs — baseline new_delete, reference "
                                            "bare_list, 5 runs each"))
        header, rule = lines[1], lines[2]
        self.assertEqual(len(header), len(rule))


class CompareTables(unittest.TestCase):
    def test_new_against_old(self):
        new_doc = load_fixture()
        old_doc = copy.deepcopy(new_doc)
        for e in old_doc["benchmarks"]:  # OLD: size_class 50% slower; a row only in OLD
            if "/size_class/" in e.get("run_name", "") and "real_time" in e:
                e["real_time"] *= 1.5
        old_doc["benchmarks"].append({"name": "InsertSingle/gone/fresh", "run_name":
                                      "InsertSingle/gone/fresh", "run_type": "iteration",
                                      "real_time": 1, "time_unit": "us"})
        compared = analysis.analyze_compare(results.from_json(old_doc),
                                            results.from_json(new_doc))
        insert = table_of(compared, "InsertSingle")
        g = tables.grid(insert)
        self.assertEqual(g.headers[:4], ["strategy/variant", "old time/op", "new time/op", "delta"])
        rows = {cells[0]: cells for cells in g.rows}
        self.assertEqual(rows["size_class/pooled"][3], "-33.33% (p=0.008)")
        self.assertEqual(rows["new_delete/fresh"][3], "~ (p=1.000)")
        self.assertEqual(rows["gone/fresh"][2], "-")
        self.assertIn("2 faster, 0 slower", tables.verdict_lines(insert)[0])


class Files(unittest.TestCase):
    def test_csv_html_and_charts(self):
        analyzed = analysis.analyze_run(results.from_json(load_fixture()))
        with tempfile.TemporaryDirectory() as out:
            path = os.path.join(out, "summary.csv")
            summary_csv.write(path, analyzed)
            with open(path, newline="", encoding="utf-8") as f:
                reader = csv.DictReader(f)
                self.assertEqual(reader.fieldnames, summary_csv.header())
                records = list(reader)
            self.assertEqual(len(records), sum(len(t.rows) for t in analyzed))
            pooled = next(r for r in records if r["workload"] == "InsertSingle"
                          and r["label"] == "size_class/pooled")
            self.assertEqual(pooled["allocs_per_op_delta_pct"], "-90")
            self.assertLess(float(pooled["ns_per_op_p"]), 0.05)
            self.assertEqual(pooled["baseline"], "new_delete/fresh")

            chart_paths = charts.write_all(analyzed, os.path.join(out, "charts"))
            self.assertIn("AllocMixedShared thread scaling", chart_paths)
            for p in chart_paths.values():
                with open(p, "rb") as f:
                    self.assertEqual(f.read(8), b"\x89PNG\r\n\x1a\n")
            html_path = os.path.join(out, "report.html")
            html_report.write(html_path, "t", analyzed, chart_paths, {"host_name": "h"}, [])
            with open(html_path, encoding="utf-8") as f:
                page = f.read()
            self.assertEqual(page.count('src="data:image/png;base64,'), len(chart_paths))
            self.assertIn("<td class=\"num better\">-90.00% (p=0.004)</td>", page)


class Progress_(unittest.TestCase):
    def test_plain_lines_when_not_a_terminal(self):
        stream = io.StringIO()
        p = Progress(2, 1.0, stream)
        p.start("A/new_delete")
        p.finish_one()
        p.start("B/new_delete")
        lines = stream.getvalue().splitlines()
        self.assertTrue(lines[0].startswith("[1/2] A/new_delete  (about 2s left)"), lines)
        self.assertTrue(lines[1].startswith("[2/2] B/new_delete"), lines)
        self.assertEqual(format_duration(125), "2m05s")


class Runner(unittest.TestCase):
    """The runner against fake_bench.py, which speaks Google Benchmark's command line."""

    def test_filter_escape(self):
        self.assertEqual(runner.ere_escape("A/size_class:max=1(K)/fresh"),
                         "A/size_class:max=1\\(K\\)/fresh")

    def test_narrowed_plan_keeps_baseline_and_references(self):
        plan = runner.plan(FAKE_BENCH, runner.strategy_names(FAKE_BENCH), strategy="size_class",
                           workloads=["InsertSingle", "AllocPairs"], preloads=["jemalloc"])
        # The rows of one table run back to back, so they share the machine's load.
        self.assertEqual([j.display for j in plan.jobs], [
            "AllocPairs/size_class", "AllocPairs/bare_list", "AllocPairs/new_delete",
            "AllocPairs/new_delete [preload=jemalloc]", "InsertSingle/size_class/fresh",
            "InsertSingle/size_class/pooled", "InsertSingle/limit",
            "InsertSingle/new_delete/fresh", "InsertSingle/new_delete/fresh [preload=jemalloc]"])
        self.assertEqual(plan.jobs[-1].args, ("--strategy=new_delete",))

    def test_unknown_workload_is_an_error_that_lists_the_workloads(self):
        with self.assertRaisesRegex(runner.BenchError, "workloads available: AllocPairs"):
            runner.plan(FAKE_BENCH, runner.strategy_names(FAKE_BENCH), workloads=["Nope"], preloads=[])

    def test_strategies_come_from_the_binary(self):
        listed = runner.list_strategies(FAKE_BENCH)
        self.assertEqual([s["name"] for s in listed][:2], ["new_delete", "std_sync_pool"])
        self.assertTrue(listed[0]["thread_safe"])
        self.assertEqual(runner.strategy_names(FAKE_BENCH), tuple(s["name"] for s in listed))

    def test_a_binary_without_a_strategy_list_is_an_error(self):
        with self.assertRaisesRegex(runner.BenchError, "printed no JSON"):
            runner.list_strategies("/bin/true")

    def test_missing_binary(self):
        with self.assertRaisesRegex(runner.BenchError, "no such benchmark binary"):
            runner.list_benchmarks("/nonexistent/pmrkit_bench")

    def test_a_crashing_benchmark_costs_one_row(self):
        with tempfile.TemporaryDirectory() as out:
            done = subprocess.run(
                [sys.executable, os.path.join(REPORT, "run.py"), "--bench", FAKE_BENCH,
                 "--out", out, "--quick", "--workload", "InsertSingle"], capture_output=True,
                text=True, timeout=120, env=dict(os.environ, FAKE_BENCH_CRASH="monotonic/pooled"))
            self.assertEqual(done.returncode, 1)
            self.assertIn("FAILED InsertSingle/monotonic/pooled: exit 134: fake_bench: simulated "
                          "crash", done.stderr)
            self.assertIn("monotonic/fresh", done.stdout)
            self.assertNotIn("monotonic/pooled", done.stdout)
            with open(os.path.join(out, "report.html"), encoding="utf-8") as f:
                self.assertIn("failed: InsertSingle/monotonic/pooled", f.read())

    def test_run_py_end_to_end(self):
        with tempfile.TemporaryDirectory() as out:
            done = subprocess.run(
                [sys.executable, os.path.join(REPORT, "run.py"), "--bench", FAKE_BENCH,
                 "--out", out, "--quick", "--strategy", "monotonic", "--workload",
                 "DatagramNoFormatting", "--no-preload"], capture_output=True, text=True,
                timeout=120)
            self.assertEqual(done.returncode, 0, done.stderr)
            self.assertIn("[1/4] DatagramNoFormatting/monotonic/fresh", done.stderr)
            self.assertIn("[4/4] DatagramNoFormatting/new_delete/fresh", done.stderr)
            self.assertNotIn("preload", done.stderr)
            self.assertIn("monotonic/pooled", done.stdout)
            for name in ("results.json", "summary.csv", "report.html", "tables.txt",
                         "charts/DatagramNoFormatting.png"):
                self.assertTrue(os.path.exists(os.path.join(out, name)), name)


if __name__ == "__main__":
    unittest.main()
