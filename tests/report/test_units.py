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
import re
import subprocess
import sys
import tempfile
import textwrap
import unittest

import numpy
import scipy.stats

HERE = os.path.dirname(os.path.abspath(__file__))
REPORT = os.path.normpath(os.path.join(HERE, "..", "..", "bench", "report"))
FIXTURE = os.path.join(HERE, "fixtures", "sample_run.json")
FAKE_BENCH = os.path.join(HERE, "fixtures", "fake_bench.py")
sys.path.insert(0, REPORT)

import analysis  # noqa: E402
import html_report  # noqa: E402
import in_process  # noqa: E402
import metrics as m  # noqa: E402
import charts  # noqa: E402
import compare  # noqa: E402
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
        self.check("ContainerMap/build/size_class/shared/manual_time", "ContainerMap/build",
                   "size_class", "shared")

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
        self.check("ContainerMap/read/my_arena/shared", "ContainerMap/read", "my_arena", "shared")

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
        # The same count in all 5 repetitions is one counting process's, read once.
        self.assertEqual(row.values("allocs_per_op"), [6.0])
        self.assertEqual(row.values("bytes_per_op"), [700.0])
        self.assertTrue(all(300 < v < 400 for v in row.values("mb_per_s")))

    def test_errors_are_collected_not_counted(self):
        self.assertEqual([name for name, _ in self.set.errors], ["InsertSingle/boost_pool/fresh"])
        self.assertNotIn(results.parse_name("InsertSingle/boost_pool/fresh"), self.set.rows)

    def test_values_that_are_not_numbers_are_left_out(self):
        # Google Benchmark writes NaN for a counter it could not compute: one such value must
        # not reach a median or a test (the exact U test's ranks crashed on it).
        def entry(index, time, faults, held=2000.0):
            return {"name": "InsertSingle/new_delete/fresh", "run_type": "iteration",
                    "repetition_index": index, "real_time": time, "cpu_time": time,
                    "time_unit": "ns", "faults_per_op": faults, "peak_held_bytes": held,
                    "peak_live_bytes": 1000.0}
        nan = float("nan")
        doc = {"context": {}, "benchmarks": [entry(0, 100.0, 0.0), entry(1, nan, nan),
                                             entry(2, 102.0, 0.0, held=nan),
                                             entry(3, float("inf"), 0.0)]}
        row = results.from_json(doc).rows[results.parse_name("InsertSingle/new_delete/fresh")]
        self.assertEqual(row.values("ns_per_op"), [100.0, 102.0])
        self.assertEqual(row.values("faults_per_op"), [0.0, 0.0, 0.0])
        self.assertEqual(row.values("held_over_live"), [2.0, 2.0, 2.0])
        self.assertIsNotNone(stats.u_test(row.values("faults_per_op"), [0.0, 1.0, 0.0]))

    def test_a_file_that_cannot_be_read_is_named_not_a_traceback(self):
        with tempfile.TemporaryDirectory() as d:
            for path, reason in ((os.path.join(d, "missing.json"), "No such file"),
                                 (d, "Is a directory")):
                with self.assertRaises(SystemExit) as caught:
                    results.load(path)
                self.assertIn(path, str(caught.exception.code))
                self.assertIn(reason, str(caught.exception.code))
            garbage = os.path.join(d, "garbage.json")
            with open(garbage, "wb") as f:
                f.write(b"\xff\xfe not json")
            with self.assertRaises(SystemExit) as caught:
                results.load(garbage)
            self.assertIn("not a Google Benchmark JSON file", str(caught.exception.code))

    def test_preload_rows_are_rows_of_their_own(self):
        plain = results.parse_name("InsertSingle/malloc/fresh")
        tagged = results.RowKey("InsertSingle", 1, "malloc", "fresh", "jemalloc")
        self.assertIn(tagged, self.set.rows)
        self.assertNotEqual(self.set.rows[plain].values("ns_per_op"),
                            self.set.rows[tagged].values("ns_per_op"))

    def test_each_time_keeps_its_round(self):
        row = self.set.rows[results.parse_name("AllocPairs/new_delete")]
        self.assertEqual(row.rounds, [0, 1, 2, 3, 4])

    def test_aggregates_only_file_gives_one_sample_from_the_mean(self):
        doc = {"benchmarks": [
            {"name": "AllocPairs/new_delete_mean", "run_name": "AllocPairs/new_delete",
             "run_type": "aggregate", "aggregate_name": "mean", "real_time": 10, "time_unit": "ns"},
            {"name": "AllocPairs/new_delete_stddev", "run_name": "AllocPairs/new_delete",
             "run_type": "aggregate", "aggregate_name": "stddev", "real_time": 1,
             "time_unit": "ns"}]}
        row = results.from_json(doc).rows[results.parse_name("AllocPairs/new_delete")]
        self.assertEqual(row.values("ns_per_op"), [10.0])
        self.assertEqual(row.rounds, [None])  # a mean belongs to no round

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

    def test_small_tied_samples_get_the_exact_p(self):
        # scipy's normal approximation gave 0.047 here; no split of 3+3 goes below 2/20.
        self.assertAlmostEqual(stats.u_test([1.0] * 3, [1.00002] * 3), 0.1)
        self.assertAlmostEqual(stats.u_test([512.0] * 4, [500.0] * 4), 2 / 70)
        self.assertFalse(stats.compare([1.0] * 3, [1.00002] * 3).significant)
        # Ties on both sides, unequal sizes: as scipy's exact permutation test has it.
        old, new = [1.0, 1.0, 2.0, 3.0], [2.0, 2.0, 3.0, 3.0, 4.0]
        expected = scipy.stats.permutation_test(
            (old, new), lambda a, b, axis: scipy.stats.mannwhitneyu(a, b, axis=axis).statistic,
            permutation_type="independent", n_resamples=numpy.inf).pvalue
        self.assertAlmostEqual(stats.u_test(old, new), expected)

    def test_counted_changes_carry_no_p(self):
        delta = stats.compare_counted([1.05], [1.0])
        self.assertIsNone(delta.p)
        self.assertAlmostEqual(delta.change, -0.05 / 1.05)
        self.assertEqual(tables.format_delta(delta), "-4.76% (counted once)")
        self.assertEqual(tables.format_delta(stats.compare_counted([6.0], [6.0])),
                         "= (counted once)")
        self.assertEqual(tables.format_delta(stats.compare_counted([0.0], [2.0])),
                         "+inf% (counted once)")

    def test_zero_baseline(self):
        self.assertEqual(stats.relative_change(0, 0), 0.0)
        self.assertIsNone(stats.relative_change(0, 5))
        self.assertIsNone(stats.ratio(5, 0))

    def test_paired_ratio_pairs_rounds(self):
        # Round 2 ran slow for both rows: apart, the medians say 1.50x; round by round the row
        # took 0.9 of the rival's time in every round (its samples listed in another order).
        row, rival = [18.0, 27.0, 9.0], [10.0, 20.0, 30.0]
        paired = stats.paired_ratio(row, [1, 2, 0], rival, [0, 1, 2])
        self.assertAlmostEqual(paired.median, 0.9)
        self.assertEqual((paired.rounds, paired.faster), (3, 3))
        self.assertAlmostEqual(stats.ratio(18.0, 20.0), 0.9)  # medians: 18 over 20
        self.assertEqual(stats.paired_ratio([30.0, 5.0], [0, 1], [10.0, 10.0], [0, 1]).faster, 1)

    def test_signed_rank_test_of_the_rounds(self):
        # Every round on one side: p = 2 / 2^n, first below 0.05 at six rounds.
        self.assertEqual(stats.MIN_PAIRED_ROUNDS, 6)
        self.assertAlmostEqual(stats.signed_rank_p([1.1, 1.2, 1.3, 1.4, 1.5, 1.6]), 2 / 64)
        self.assertIsNone(stats.signed_rank_p([1.1, 1.2, 1.3, 1.4, 1.5]))
        # It weighs how far each round leans: five small rounds above 1 and one far below do
        # not make a difference, where a sign test would count 5 of 6.
        ratios = [1.01, 1.02, 1.03, 1.04, 1.05, 0.5]
        # Ranks 1-5 positive, T+ = 15 of 21; P(T+ >= 15) = P(T- <= 6): 14 of the 64 subsets
        # of 1..6 sum to 6 or less, so two-sided 28/64.
        self.assertAlmostEqual(stats.signed_rank_p(ratios), 28 / 64)
        self.assertAlmostEqual(enumerated_two_sided_p([1, 2, 3, 4, 5, 6], [1, 2, 3, 4, 5]),
                               28 / 64)
        # Ties take midranks: three equal rounds above 1 (ranks 2 each), one below (rank 4),
        # two more above (5, 6): T+ = 17 of 21 in doubled terms 34 of 42.
        tied = [1.1, 1.1, 1.1, 1 / 1.2, 1.3, 1.4]
        expected = enumerated_two_sided_p([2, 2, 2, 4, 5, 6], positive=[2, 2, 2, 5, 6])
        self.assertAlmostEqual(stats.signed_rank_p(tied), expected)
        # Rounds of equal time drop out; all equal is no difference.
        self.assertEqual(stats.signed_rank_p([1.0] * 6), 1.0)
        self.assertEqual(stats.signed_rank_p([1.0] * 5 + [1.2]), 1.0)

    def test_paired_ratio_calls_a_difference_only_when_tested(self):
        rounds = list(range(8))
        rival = [10.0] * 8
        slower = stats.paired_ratio([11.0, 12, 11, 13, 12, 11, 14, 12], rounds, rival, rounds)
        self.assertEqual((slower.call, slower.faster), ("slower", 0))
        self.assertLess(slower.p, 0.05)
        faster = stats.paired_ratio([9.0, 8, 9, 7, 8, 9, 6, 8], rounds, rival, rounds)
        self.assertEqual(faster.call, "faster")
        level = stats.paired_ratio([9.0, 11, 9.5, 10.5, 9.8, 10.3, 9.9, 10.1], rounds, rival,
                                   rounds)
        self.assertEqual(level.call, "~")
        # Five rounds cannot call it; nor can a ratio of medians.
        five = stats.paired_ratio([20.0] * 5, rounds[:5], rival[:5], rounds[:5])
        self.assertEqual((five.p, five.call), (None, ""))
        unknown = stats.paired_ratio([20.0] * 8, [None] * 8, rival, rounds)
        self.assertEqual((unknown.rounds, unknown.call), (0, ""))

    def test_the_test_names_the_direction_not_the_median(self):
        # 16 rounds 1% faster, 14 about 50% slower: the median of the ratios is 0.99, but the
        # signed-rank test weighs how far each round leans and finds the row slower.
        rounds = list(range(30))
        rival = [100.0] * 30
        mine = [99.0 + 0.01 * i for i in range(16)] + [150.0 + i for i in range(14)]
        skewed = stats.paired_ratio(mine, rounds, rival, rounds)
        self.assertLess(skewed.median, 1)
        self.assertLess(skewed.p, 0.05)
        self.assertEqual((skewed.call, skewed.faster), ("slower", 16))
        # The mirror image: a median above 1, and the test finds the row faster.
        mirror = stats.paired_ratio([100.0 * 100.0 / x for x in mine], rounds, rival, rounds)
        self.assertGreater(mirror.median, 1)
        self.assertEqual(mirror.call, "faster")

    def test_paired_ratio_pairs_only_rounds_both_ran(self):
        paired = stats.paired_ratio([2.0, 4.0, 100.0], [0, 1, 7], [1.0, 2.0], [0, 1])
        self.assertEqual((paired.median, paired.rounds, paired.faster), (2.0, 2, 0))

    def test_paired_ratio_without_rounds_is_the_ratio_of_medians(self):
        for rounds in ([None, None, None], [0, 0, 1], [0, 1]):  # unknown, repeated, not one each
            paired = stats.paired_ratio([3.0, 6.0, 9.0], rounds, [2.0, 4.0, 6.0], [0, 1, 2])
            self.assertEqual((paired.median, paired.rounds, paired.faster), (1.5, 0, 0), rounds)
        self.assertIsNone(stats.paired_ratio([], [], [1.0], [0]))
        self.assertIsNone(stats.paired_ratio([1.0], [0], [0.0], [0]))

    def test_summary(self):
        s = stats.summarize([1, 2, 3, 4, 100])
        self.assertEqual((s.n, s.median), (5, 3.0))
        self.assertAlmostEqual(s.spread, (4 - 2) / 2 / 3)
        self.assertIsNone(stats.summarize([]))


def enumerated_two_sided_p(ranks: list[float], positive: list[float]) -> float:
    """The signed-rank test's two-sided p by enumerating every sign pattern (an independent
    check of stats.signed_rank_p's counting)."""
    import itertools
    observed = sum(positive)
    sums = [sum(r for r, sign in zip(ranks, signs) if sign)
            for signs in itertools.product((0, 1), repeat=len(ranks))]
    low = sum(x <= observed for x in sums) / len(sums)
    high = sum(x >= observed for x in sums) / len(sums)
    return min(1.0, 2 * min(low, high))


def rival_table(times: dict[tuple[str, str], list[float]]) -> analysis.Table:
    """One ContainerMap/build table from per-round times of (strategy, variant) rows."""
    doc = {"context": {}, "benchmarks": [
        {"name": f"ContainerMap/build/{strategy}/{variant}/manual_time",
         "run_type": "iteration", "repetition_index": i, "real_time": t, "time_unit": "us"}
        for (strategy, variant), ts in times.items() for i, t in enumerate(ts)]}
    (table,) = analysis.analyze_run(results.from_json(
        doc, known=("new_delete", "size_class", "mimalloc_plain", "checked")))
    return table


class RunTables(unittest.TestCase):
    def setUp(self):
        self.tables = analysis.analyze_run(results.from_json(load_fixture()))

    def test_one_table_per_workload_and_thread_count(self):
        self.assertEqual([t.title for t in self.tables],
                         ["AllocPairs", "AllocPhases", "AllocMixedShared",
                          "AllocMixedShared threads:2", "InsertSingle",
                          "Serialization/with_metrics"])

    def test_baseline_and_reference(self):
        insert = table_of(self.tables, "InsertSingle")
        self.assertEqual((insert.baseline, insert.reference), ("new_delete/fresh", "limit"))
        pairs = table_of(self.tables, "AllocPairs")
        self.assertEqual((pairs.baseline, pairs.reference), ("new_delete", "bare_list"))

    def test_rows_against_the_rival_round_by_round(self):
        # Three rounds; round 1 slow for every row. Each row against mimalloc_plain's row of
        # its own variant, shared (which the rival lacks) against its fresh row.
        times = {("size_class", "fresh"): [12, 24, 12], ("size_class", "pooled"): [9, 30, 9],
                 ("size_class", "shared"): [10, 20, 10], ("new_delete", "fresh"): [30, 60, 30],
                 ("mimalloc_plain", "fresh"): [10, 20, 10],
                 ("mimalloc_plain", "pooled"): [10, 20, 10]}
        doc = {"context": {}, "benchmarks": [
            {"name": f"ContainerMap/build/{strategy}/{variant}/manual_time",
             "run_type": "iteration", "repetition_index": i, "real_time": t, "time_unit": "us"}
            for (strategy, variant), ts in times.items() for i, t in enumerate(ts)]}
        (table,) = analysis.analyze_run(results.from_json(
            doc, known=("new_delete", "size_class", "mimalloc_plain")))
        self.assertEqual(table.rival, "mimalloc_plain")
        g = tables.grid(table)
        self.assertEqual(g.headers[-1], "vs mimalloc_plain")
        cells = {row[0]: row[-1] for row in g.rows}
        self.assertEqual(cells, {"new_delete/fresh": "3.00x (0/3)",
                                 "size_class/fresh": "1.20x (0/3)",
                                 "size_class/pooled": "0.90x (2/3)",
                                 "size_class/shared": "1.00x (0/3)",
                                 "mimalloc_plain/fresh": "—", "mimalloc_plain/pooled": "—"})
        self.assertIn("vs mimalloc_plain: each round's time/op", tables.render_all([table]))
        # No rival rows, no column and no legend.
        insert = table_of(self.tables, "InsertSingle")
        self.assertIsNone(insert.rival)
        self.assertNotIn("vs mimalloc_plain", tables.grid(insert).headers)
        self.assertNotIn("vs mimalloc_plain", tables.render_all([insert]))

    def test_rival_verdict_names_rows_the_rounds_tell_apart(self):
        rival = [10.0, 20.0, 10.0, 12.0, 10.0, 30.0, 11.0]  # round 5 slow for every row
        table = rival_table({
            ("size_class", "pooled"): [9.0, 18.0, 9.5, 11.0, 9.0, 27.0, 10.0],   # faster
            ("size_class", "fresh"): [11.0, 22.0, 11.5, 13.0, 11.0, 33.0, 12.0],  # slower
            ("new_delete", "fresh"): [9.0, 22.0, 9.5, 13.0, 9.8, 31.0, 10.5],    # mixed
            ("checked", "fresh"): [50.0] * 7,  # a debugging strategy: never named
            ("mimalloc_plain", "fresh"): rival, ("mimalloc_plain", "pooled"): rival})
        line = tables.rival_verdict_line(table)
        self.assertTrue(line.startswith(
            "against mimalloc_plain (signed-rank test over 7 rounds, p < 0.05): "), line)
        self.assertIn("faster: size_class/pooled 0.90x (p=0.016)", line)
        self.assertIn("slower: size_class/fresh 1.10x (p=0.016)", line)
        self.assertIn("not told apart: new_delete/fresh", line)
        self.assertNotIn("checked", line)
        self.assertIn(line, tables.verdict_lines(table))
        head = tables.render_all([table]).split("\n\n")[0]
        self.assertIn("  size_class: faster in 1, slower in 1, not told apart in 0 of 2 rows",
                      head)
        self.assertIn("  new_delete: faster in 0, slower in 0, not told apart in 1 of 1 rows",
                      head)
        self.assertNotIn("checked", head)

    def test_rival_verdict_says_why_it_cannot_call(self):
        few = rival_table({("size_class", "pooled"): [20.0] * 5,
                           ("mimalloc_plain", "pooled"): [10.0] * 5})
        expected = ("against mimalloc_plain: 5 rounds cannot tell a row from it (the paired "
                    "test needs 6: --repetitions 6 or more)")
        self.assertEqual(tables.rival_verdict_line(few), expected)
        self.assertEqual(tables.rival_tally_lines([few]), [expected])
        # No rival, no line.
        alone = rival_table({("size_class", "pooled"): [20.0] * 7})
        self.assertEqual((tables.rival_verdict_line(alone), tables.rival_tally_lines([alone])),
                         ("", []))

    def test_shared_rows_follow_pooled_ones(self):
        doc = {"context": {}, "benchmarks": [
            {"name": f"ContainerMap/build/{strategy}/{variant}/manual_time",
             "run_type": "iteration", "real_time": 1.0, "time_unit": "us"}
            for strategy, variant in (("size_class", "shared"), ("size_class", "fresh"),
                                      ("new_delete", "fresh"), ("size_class", "pooled"))]}
        # One table: "shared" is a variant, not part of the workload's name.
        (table,) = analysis.analyze_run(results.from_json(doc, known=("new_delete", "size_class")))
        self.assertEqual([r.label for r in table.rows],
                         ["new_delete/fresh", "size_class/fresh", "size_class/pooled",
                          "size_class/shared"])

    def test_row_order(self):
        labels = [r.label for r in table_of(self.tables, "InsertSingle").rows]
        # The binary's strategy order, not the interleaved order the runs finished in.
        self.assertEqual(labels[:4], ["new_delete/fresh", "new_delete/pooled", "malloc/fresh",
                                      "malloc/pooled"])
        self.assertEqual(labels[-2:], ["malloc/fresh [preload=jemalloc]", "limit"])
        pairs = [r.label for r in table_of(self.tables, "AllocPairs").rows]
        self.assertEqual(pairs[-3:], ["malloc [preload=jemalloc]", "mimalloc_plain", "bare_list"])

    def test_columns(self):
        g = tables.grid(table_of(self.tables, "InsertSingle"))
        self.assertEqual(g.headers, ["strategy/variant", "time/op", "vs base", "allocs/op",
                                     "vs base", "B/op", "vs base", "peak held", "held/live",
                                     "MB/s", "vs base", "vs limit"])
        # No bytes processed in the patterns: no MB/s columns.
        g = tables.grid(table_of(self.tables, "AllocPairs"))
        self.assertEqual(g.headers, ["strategy/variant", "time/op", "vs base", "allocs/op",
                                     "vs base", "B/op", "vs base", "peak held", "held/live",
                                     "vs bare_list", "vs mimalloc_plain"])

    def test_cells(self):
        table = table_of(self.tables, "InsertSingle")
        g = tables.grid(table)
        rows = {cells[0]: cells for cells in g.rows}
        base = rows["new_delete/fresh"]
        self.assertEqual([base[i] for i in (2, 4, 6, 10)], ["base"] * 4)
        self.assertEqual(base[3], "6")
        self.assertEqual(base[5], "700B")
        pooled = rows["size_class/pooled"]
        self.assertRegex(pooled[2], r"^-7\d\.\d\d% \(p=0\.008\)$")  # time: significantly less
        self.assertEqual(pooled[4], "-90.00% (counted once)")     # allocs 6 -> 0.6, untested
        fresh = rows["size_class/fresh"]
        self.assertEqual(fresh[4], "= (counted once)")              # same allocs as baseline
        self.assertEqual(rows["limit"][-1], "1.00x")
        self.assertRegex(base[-1], r"^3\.\d\dx$")

    def test_insignificant_and_untestable_deltas(self):
        self.assertEqual(tables.format_delta(stats.Delta(0.1, 0.31, 5, 5)), "~ (p=0.310)")
        self.assertEqual(tables.format_delta(stats.Delta(0.1, None, 1, 1)), "~ (n=1)")
        self.assertEqual(tables.format_delta(stats.Delta(-0.5, 0.008, 5, 5)), "-50.00% (p=0.008)")
        self.assertEqual(tables.format_delta(None), "—")

    def test_verdict(self):
        lines = tables.verdict_lines(table_of(self.tables, "InsertSingle"))
        self.assertRegex(lines[0], r"^fastest: monotonic/pooled at 1\d\d\.\dns/op \(p=0\.008 "
                         r"against the runner-up size_class/pooled, 5 runs each\), 0\.\d\dx "
                         r"the time of limit$")
        self.assertEqual(lines[1], "leanest: size_class/fresh at 847B peak held, 1.21x live "
                                   "(runner-up malloc/fresh; both the same in every run, 5 runs "
                                   "each)")
        # Every pooled row has the same 14 B/op: a tie, and the verdict says so.
        self.assertTrue(lines[2].startswith("fewest heap B/op: no single row; tied"), lines)
        self.assertEqual(lines[3], "time vs peak held, no row beats these in both: "
                                   "monotonic/pooled, size_class/fresh, size_class/pooled")
        self.assertTrue(lines[4].startswith("best process allocator: malloc/fresh "
                                            "[preload=jemalloc]"), lines)
        self.assertIn("note: checked/fresh, checked/pooled left out of the verdicts (a debugging "
                      "strategy)", lines)
        self.assertIn("note: preload rows run the malloc strategy with the process allocator "
                      "replaced by LD_PRELOAD", lines)
        self.assertIn("peak held measured by: mallinfo2 (new_delete, malloc); upstream ("
                      "std_sync_pool, std_unsync_pool, monotonic, size_class, checked, limit); "
                      "mimalloc_stats (mimalloc); rss (malloc [preload=jemalloc])", lines)

    def test_rendered_text_is_aligned(self):
        text = tables.render_table(table_of(self.tables, "AllocPairs"))
        lines = text.splitlines()
        self.assertTrue(lines[0].startswith("AllocPairs — baseline new_delete, reference "
                                            "bare_list, 5 interleaved runs each"))
        header, rule = lines[1], lines[2]
        self.assertEqual(len(header), len(rule))


def synthetic_doc(rows: dict, context=None) -> dict:
    """A run's JSON from {benchmark name: [ns per repetition]} or {name: ([ns...], counters)}."""
    entries = []
    for name, spec in rows.items():
        times, counters = spec if isinstance(spec, tuple) else (spec, {})
        for i, ns in enumerate(times):
            entry = {"name": name, "run_name": name, "run_type": "iteration",
                     "repetition_index": i, "real_time": ns, "time_unit": "ns"}
            entry.update(counters)
            entries.append(entry)
    return {"context": dict(context or {}), "benchmarks": entries}


def analyzed_table(rows: dict, context=None) -> analysis.Table:
    (table,) = analysis.analyze_run(results.from_json(synthetic_doc(rows, context)))
    return table


SPREAD_5 = [0.98, 0.99, 1.0, 1.01, 1.02]


class MemoryAxis(unittest.TestCase):
    def setUp(self):
        self.tables = analysis.analyze_run(results.from_json(load_fixture()))

    def test_peak_held_and_held_over_live_cells(self):
        g = tables.grid(table_of(self.tables, "InsertSingle"))
        rows = {cells[0]: dict(zip(g.headers, cells)) for cells in g.rows}
        self.assertEqual((rows["size_class/fresh"]["peak held"],
                          rows["size_class/fresh"]["held/live"]), ("847B", "1.21x"))
        self.assertEqual(rows["limit"]["held/live"], "1.00x")
        g = tables.grid(table_of(self.tables, "AllocPhases"))
        rows = {cells[0]: dict(zip(g.headers, cells)) for cells in g.rows}
        self.assertEqual(rows["monotonic"]["peak held"], "320MiB")

    def test_faults_per_op_column_only_where_the_bench_reported_it(self):
        faulting = {"ContainerMap/build/new_delete/fresh": ([7e6] * 5, {"faults_per_op": 10.0}),
                    "ContainerMap/build/size_class/fresh":
                        ([11e6] * 5, {"faults_per_op": 1500.0})}
        table = analyzed_table(faulting)
        self.assertIn(m.FAULTS, table.metrics)
        g = tables.grid(table)
        rows = {cells[0]: dict(zip(g.headers, cells)) for cells in g.rows}
        self.assertEqual(rows["size_class/fresh"]["faults/op"], "1500")
        self.assertEqual(rows["new_delete/fresh"]["faults/op"], "10")
        # A run from before the counter existed: no column, rather than a column of blanks.
        older = analyzed_table({"ContainerMap/build/new_delete/fresh": [7e6] * 5})
        self.assertNotIn(m.FAULTS, older.metrics)

    def test_held_below_live_is_unmeasured_and_judges_nothing(self):
        # A peak held below peak live cannot be: the probe missed memory the allocator had
        # before the row (an RSS high-water mark set earlier). Such a row must not be the
        # leanest nor sit on the time-vs-held front.
        counters = lambda held: {"peak_held_bytes": held, "peak_live_bytes": 64}
        table = analyzed_table({
            "AllocPairs/new_delete": ([20] * 3, counters(20000)),
            "AllocPairs/size_class": ([5] * 3, counters(8192)),
            "AllocPairs/malloc [preload=jemalloc]": ([4] * 3, counters(0)),
            "AllocPairs/malloc [preload=tcmalloc]": ([6] * 3, counters(32)),
        })
        g = tables.grid(table)
        rows = {cells[0]: dict(zip(g.headers, cells)) for cells in g.rows}
        for label in ("malloc [preload=jemalloc]", "malloc [preload=tcmalloc]"):
            self.assertEqual((rows[label]["peak held"], rows[label]["held/live"]), ("—", "—"))
        self.assertEqual(rows["size_class"]["held/live"], "128x")
        v = analysis.verdict(table)
        self.assertEqual([r.label for r in v.pareto], ["size_class"])
        self.assertEqual([r.label for r in v.leanest.rows], ["size_class"])
        self.assertIn("note: peak held unmeasured for malloc [preload=jemalloc], malloc "
                      "[preload=tcmalloc]: it read below peak live, so the probe missed memory "
                      "the allocator held before the row; left out of the leanest verdict and "
                      "the time-vs-held front", tables.verdict_lines(table))

    def test_held_below_live_in_some_runs_keeps_the_measured_ones(self):
        doc = synthetic_doc({"AllocPairs/malloc": [10, 10, 10]})
        for held, entry in zip((50, 300, 500), doc["benchmarks"]):
            entry.update({"peak_held_bytes": held, "peak_live_bytes": 100})
        (row,) = results.from_json(doc).rows.values()
        self.assertEqual(row.values("peak_held_bytes"), [300, 500])
        self.assertEqual(row.values("held_over_live"), [3.0, 5.0])

    def test_held_method_from_the_label_then_the_context(self):
        row = self.tables[0].rows[0]
        self.assertEqual((row.label, row.held_method), ("new_delete", "mallinfo2"))
        preload = row_of(table_of(self.tables, "AllocPairs"), "malloc [preload=jemalloc]")
        self.assertEqual(preload.held_method, "rss")  # the label wins over the context's map
        table = analyzed_table({"AllocPairs/size_class": ([10] * 3, {
            "peak_held_bytes": 100, "peak_live_bytes": 80})},
            {results.HELD_METHOD_FIELD: {"size_class": "upstream"}})
        self.assertEqual(table.rows[0].held_method, "upstream")

    def test_held_method_map_as_google_benchmark_writes_it_a_json_string(self):
        table = analyzed_table({"AllocPairs/malloc": ([10] * 3, {
            "peak_held_bytes": 100, "peak_live_bytes": 80})},
            {results.HELD_METHOD_FIELD: json.dumps({"malloc": "mallinfo2"})})
        self.assertEqual(table.rows[0].held_method, "mallinfo2")

    def test_phases_in_phase_order_whatever_the_counter_order(self):
        # Google Benchmark writes counters alphabetically: free90, grow, remix.
        counters = {"peak_held_bytes": 40, "peak_live_bytes": 32,
                    "phase_free90_held_bytes": 20, "phase_free90_live_bytes": 4,
                    "phase_grow_held_bytes": 40, "phase_grow_live_bytes": 32,
                    "phase_remix_held_bytes": 30, "phase_remix_live_bytes": 16}
        table = analyzed_table({"AllocPhases/size_class": ([10] * 3, counters)})
        self.assertEqual(table.phases, ["grow", "free90", "remix"])
        self.assertEqual(tables.phase_grid(table).rows[0][1:],
                         ["40B", "1.25x", "20B", "5.00x", "30B", "1.88x"])

    def test_a_file_without_the_memory_counters_has_no_memory_columns(self):
        table = analyzed_table({"AllocPairs/new_delete": [10, 11, 12],
                                "AllocPairs/bare_list": [5, 5.5, 6]})
        self.assertNotIn("peak held", tables.grid(table).headers)
        self.assertFalse(any(line.startswith("leanest") for line in tables.verdict_lines(table)))

    def test_compare_with_an_old_file_shows_a_dash_for_the_missing_counters(self):
        new = results.from_json(load_fixture())
        old_doc = load_fixture()
        for entry in old_doc["benchmarks"]:
            for field in [f for f in entry if f.startswith(("peak_", "phase_"))]:
                del entry[field]
        compared = analysis.analyze_compare(results.from_json(old_doc), new)
        g = tables.grid(table_of(compared, "AllocPairs"))
        self.assertIn("old peak held", g.headers)
        row = dict(zip(g.headers, g.rows[0]))
        self.assertEqual((row["old peak held"], row["new peak held"]), ("—", "83B"))
        self.assertEqual(g.rows[0][3], "~ (p=1.000)")  # time: the same samples
        self.assertEqual(g.rows[0][g.headers.index("new peak held") + 1], "—")  # its delta
        self.assertEqual(g.rows[0][g.headers.index("old held/live")], "—")
        with tempfile.TemporaryDirectory() as out:
            path = os.path.join(out, "old.json")
            with open(path, "w", encoding="utf-8") as f:
                json.dump(old_doc, f)
            done = subprocess.run([sys.executable, os.path.join(REPORT, "compare.py"), path,
                                   FIXTURE, "--workload", "AllocPairs"],
                                  capture_output=True, text=True, timeout=60)
        self.assertEqual(done.returncode, 0, done.stderr)
        self.assertIn("old peak held", done.stdout)
        # The fixture's boost_pool row reported an error: its message reaches the user.
        self.assertIn("NEW: error in InsertSingle/boost_pool/fresh: boost_pool: upstream threw "
                      "std::bad_alloc", done.stderr)

    def test_phase_table(self):
        g = tables.phase_grid(table_of(self.tables, "AllocPhases"))
        self.assertEqual(g.headers, ["strategy/variant", "grow held", "grow held/live",
                                     "free90 held", "free90 held/live", "remix held",
                                     "remix held/live"])
        rows = {cells[0]: cells for cells in g.rows}
        self.assertEqual(rows["size_class"][1:5], ["48.4MiB", "1.21x", "48.4MiB", "12.1x"])
        self.assertEqual(rows["malloc"][3:5], ["20MiB", "5.00x"])  # malloc gave some back
        self.assertIsNone(tables.phase_grid(table_of(self.tables, "AllocPairs")))
        self.assertIn("at the end of each phase",
                      tables.render_table(table_of(self.tables, "AllocPhases")))


class Pareto(unittest.TestCase):
    def test_rows_no_other_row_beats_in_both(self):
        def row(ns, held):
            return ([ns] * 3, {"peak_held_bytes": held, "peak_live_bytes": 100})
        table = analyzed_table({
            "AllocPairs/fast_big": row(10, 1000), "AllocPairs/slow_small": row(50, 120),
            "AllocPairs/beaten": row(60, 1100),        # slower and bigger than both
            "AllocPairs/half_beaten": row(50, 500),    # as slow as slow_small, holds more
            "AllocPairs/middle": row(30, 400), "AllocPairs/bare_list": row(5, 100)})
        front = [r.label for r in analysis.pareto_front(table.rows)]
        # bare_list beats every row in both; the reference is not a candidate in a verdict.
        self.assertEqual(front, ["bare_list"])
        v = analysis.verdict(table)
        self.assertEqual([r.label for r in v.pareto], ["fast_big", "slow_small", "middle"])

    def test_equal_points_do_not_beat_each_other(self):
        front = analysis.pareto_front(analyzed_table({
            "AllocPairs/a": ([10] * 3, {"peak_held_bytes": 10, "peak_live_bytes": 10}),
            "AllocPairs/b": ([10] * 3, {"peak_held_bytes": 10, "peak_live_bytes": 10})}).rows)
        self.assertEqual(len(front), 2)

    def test_csv_marks_the_front(self):
        analyzed = analysis.analyze_run(results.from_json(load_fixture()))
        records = summary_csv.rows(table_of(analyzed, "InsertSingle"))
        self.assertEqual(sorted(r["label"] for r in records if r["pareto"] == "yes"),
                         ["monotonic/pooled", "size_class/fresh", "size_class/pooled"])


class TieVerdicts(unittest.TestCase):
    def test_overlapping_rows_are_a_tied_group_not_a_winner(self):
        table = analyzed_table({
            "AllocPairs/new_delete": [20 * f for f in SPREAD_5],
            "AllocPairs/a": [10.0, 10.4, 10.8, 11.2, 11.6],
            "AllocPairs/b": [10.2, 10.6, 11.0, 11.4, 11.8],
            "AllocPairs/bare_list": [5 * f for f in SPREAD_5]})
        v = analysis.verdict(table)
        self.assertIsNone(v.fastest.winner)
        self.assertEqual([r.label for r in v.fastest.rows], ["a", "b"])
        line = tables.verdict_lines(table)[0]
        self.assertEqual(line, "fastest: no single row; tied (U test p ≥ 0.05, 5 runs each): "
                               "a, b; lowest median a at 10.8ns/op")

    def test_a_winner_is_named_with_its_p_against_the_runner_up(self):
        table = analyzed_table({"AllocPairs/new_delete": [20 * f for f in SPREAD_5],
                                "AllocPairs/a": [10 * f for f in SPREAD_5],
                                "AllocPairs/b": [12 * f for f in SPREAD_5]})
        v = analysis.verdict(table)
        self.assertEqual((v.fastest.winner.label, v.fastest.runner_up.label), ("a", "b"))
        self.assertTrue(tables.verdict_lines(table)[0].startswith(
            "fastest: a at 10ns/op (p=0.008 against the runner-up b, 5 runs each)"))

    def test_three_runs_never_name_a_single_fastest(self):
        table = analyzed_table({"AllocPairs/new_delete": [20, 21, 22],
                                "AllocPairs/a": [10, 10.1, 10.2], "AllocPairs/b": [12, 13, 14]})
        self.assertIn("fastest: no single row; tied (U test p ≥ 0.05, 3 runs each)",
                      tables.verdict_lines(table)[0])
        table = analyzed_table({"AllocPairs/new_delete": [20, 21],
                                "AllocPairs/a": [10, 10.1]})
        self.assertIn("tied (too few runs to tell them apart, 2 runs each)",
                      tables.verdict_lines(table)[0])

    def test_counted_bytes_are_one_value_a_row_compared_untested(self):
        # B/op in every repetition is a copy of one counting process's: the verdict says so
        # instead of "the same in every run, 3 runs each".
        table = analyzed_table({
            "InsertSingle/new_delete/fresh": ([20, 21, 22], {"bytes_per_op": 700}),
            "InsertSingle/a/pooled": ([10, 11, 12], {"bytes_per_op": 0}),
            "InsertSingle/b/pooled": ([10, 11, 12], {"bytes_per_op": 128})})
        line = next(l for l in tables.verdict_lines(table) if l.startswith("fewest"))
        self.assertEqual(line, "fewest heap B/op: a/pooled at 0B/op (runner-up b/pooled; one "
                               "counting run each, compared by value, untested)")
        table = analyzed_table({
            "InsertSingle/a/pooled": ([10, 11, 12], {"bytes_per_op": 100}),
            "InsertSingle/b/pooled": ([10, 11, 12], {"bytes_per_op": 100.5})})
        line = next(l for l in tables.verdict_lines(table) if l.startswith("fewest"))
        self.assertEqual(line, "fewest heap B/op: no single row; tied (within 1B or 1% of the "
                               "lowest, one counting run each): a/pooled, b/pooled; lowest "
                               "a/pooled at 100B/op")

    def test_peak_held_the_same_in_every_run_needs_no_test(self):
        # Each timed process measures its own peak held: 3 runs cannot reach p < 0.05, but the
        # same figure in every run is not noise.
        table = analyzed_table({
            "InsertSingle/new_delete/fresh": ([20, 21, 22], {"peak_held_bytes": 700}),
            "InsertSingle/a/pooled": ([10, 11, 12], {"peak_held_bytes": 100}),
            "InsertSingle/b/pooled": ([10, 11, 12], {"peak_held_bytes": 228})})
        line = next(l for l in tables.verdict_lines(table) if l.startswith("leanest"))
        self.assertEqual(line, "leanest: a/pooled at 100B peak held (runner-up b/pooled; both "
                               "the same in every run, 3 runs each)")

    def test_preload_note_names_the_strategy_that_ran(self):
        table = analyzed_table({"InsertSingle/new_delete/fresh": [20, 21, 22],
                                "InsertSingle/new_delete/fresh [preload=tcmalloc]": [15, 16, 17]})
        self.assertIn("note: preload rows run the new_delete strategy with the process "
                      "allocator replaced by LD_PRELOAD", tables.verdict_lines(table))

    def test_one_run_names_no_single_row(self):
        table = analyzed_table({"AllocPairs/a": ([24.5], {"bytes_per_op": 0}),
                                "AllocPairs/b": ([57.2], {"bytes_per_op": 64})})
        lines = tables.verdict_lines(table)
        self.assertTrue(lines[0].startswith("fastest: no single row; tied (too few runs to "
                                            "tell them apart, 1 run each)"), lines)
        # B/op is one count a row however many runs were timed: 0 against 64 is a difference.
        self.assertTrue(lines[1].startswith("fewest heap B/op: a at 0B/op (runner-up b; one "
                                            "counting run each"), lines)
        self.assertIn("1 run each", tables.caption(table))

    def test_caption_names_a_reference_only_where_there_is_one(self):
        with_limit = analyzed_table({"InsertSingle/new_delete/fresh": [20, 21, 22],
                                     "InsertSingle/limit": [5, 6, 7]})
        self.assertIn("baseline new_delete/fresh, reference limit, 3 runs each",
                      tables.caption(with_limit))
        without = analyzed_table({"ContainerMap/build/new_delete/fresh": [20, 21, 22],
                                  "ContainerMap/build/size_class/pooled": [15, 16, 17]})
        self.assertNotIn("reference", tables.caption(without))
        self.assertIn("baseline new_delete/fresh, 3 runs each", tables.caption(without))

    def test_checked_is_never_crowned(self):
        doc = load_fixture()
        for entry in doc["benchmarks"]:  # a noise burst that makes the debugging strategy look best
            if entry.get("run_name", "").startswith("InsertSingle/checked/pooled"):
                entry["real_time"] = 0.01  # µs
        (table,) = [t for t in analysis.analyze_run(results.from_json(doc))
                    if t.title == "InsertSingle"]
        self.assertEqual(min(table.rows, key=lambda r: r.median("ns_per_op")).label,
                         "checked/pooled")
        v = analysis.verdict(table)
        self.assertEqual(v.fastest.winner.label, "monotonic/pooled")
        self.assertNotIn("checked/pooled", [r.label for r in v.pareto])
        self.assertIn("note: checked/fresh, checked/pooled left out of the verdicts "
                      "(a debugging strategy)", tables.verdict_lines(table))

    def test_plain_wrapper_is_shown_but_never_judged(self):
        table = table_of(analysis.analyze_run(results.from_json(load_fixture())), "AllocPairs")
        plain = row_of(table, "mimalloc_plain")
        self.assertEqual(plain.role, "plain")
        self.assertNotIn(plain, analysis.verdict_rows(table))


class NoisyReference(unittest.TestCase):
    ROWS = {"InsertSingle/new_delete/fresh": [900 * f for f in SPREAD_5],
            "InsertSingle/size_class/fresh": [500 * f for f in SPREAD_5]}

    def test_a_reference_noisier_than_its_rows_is_flagged(self):
        table = analyzed_table(dict(self.ROWS, **{
            "InsertSingle/limit": [200.0, 240.0, 300.0, 380.0, 420.0]}))
        noisy = analysis.noisy_reference(table)
        self.assertIsNotNone(noisy)
        self.assertAlmostEqual(noisy.reference_spread, 70 / 300)
        self.assertIn("note: the reference limit is noisier (±23%) than the rows it judges "
                      "(median ±1%): its 'vs limit' ratios are unreliable; rerun with more "
                      "--repetitions", tables.verdict_lines(table))
        self.assertEqual({r["reference_noisy"] for r in summary_csv.rows(table)}, {"yes"})

    def test_a_quiet_reference_is_not(self):
        table = analyzed_table(dict(self.ROWS, **{"InsertSingle/limit": [
            300 * f for f in SPREAD_5]}))
        self.assertIsNone(analysis.noisy_reference(table))
        self.assertFalse(any("noisier" in line for line in tables.verdict_lines(table)))
        # Noisier than the rows but under the floor: still quiet enough to judge by.
        table = analyzed_table(dict(self.ROWS, **{"InsertSingle/limit": [
            300 * f for f in (0.94, 0.97, 1.0, 1.03, 1.06)]}))
        self.assertIsNone(analysis.noisy_reference(table))


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
        self.assertEqual(rows["gone/fresh"][2], "—")
        self.assertIn("2 faster, 0 slower", tables.verdict_lines(insert)[0])

    def test_each_runs_count_untested_rows_and_figures_of_one_side(self):
        old = results.from_json(synthetic_doc({
            "AllocPairs/new_delete": ([10, 11, 12, 13, 14], {"faults_per_op": 2.0}),
            "AllocPairs/size_class": ([5, 5.1, 5.2, 5.3, 5.4], {"faults_per_op": 1.0}),
            "AllocPairs/gone": [1, 2, 3, 4, 5]}))
        new = results.from_json(synthetic_doc({
            "AllocPairs/new_delete": [10.5, 11.5, 12.5],
            "AllocPairs/size_class": [20, 21, 22]}))
        (table,) = analysis.analyze_compare(old, new)
        # Both runs' counts, where they differ.
        self.assertIn("new vs old, old 5 runs each, new 3 runs each", tables.caption(table))
        # A row in one run only is untested, not unchanged.
        self.assertEqual(tables.verdict_lines(table)[0],
                         "time/op: 0 faster, 1 slower, 1 unchanged (p >= 0.05), 1 untested "
                         "(in one run only, or under 3 runs a side)")
        # OLD's page faults stay shown though NEW has none.
        g = tables.grid(table)
        self.assertIn("old faults/op", g.headers)
        size_class = next(c for c in g.rows if c[0] == "size_class")
        self.assertEqual(size_class[g.headers.index("old faults/op")], "1")
        # A table in OLD only says so.
        (gone,) = analysis.analyze_compare(old, results.from_json(synthetic_doc(
            {"AllocMixed/new_delete": [1, 2, 3]})))[1:]
        self.assertIn("old 5 runs each, new none", tables.caption(gone))

    def test_the_u_test_names_the_direction_not_the_medians(self):
        # OLD: 14 runs near 50, 16 near 101; NEW: 16 near 100, 14 near 1000. The median drops a
        # little (101 -> 100) but NEW's times rank above OLD's: the test finds it slower.
        old = results.from_json(synthetic_doc({"AllocPairs/new_delete":
                                               [50 + i * 0.1 for i in range(14)] +
                                               [101 + i * 0.1 for i in range(16)]}))
        new = results.from_json(synthetic_doc({"AllocPairs/new_delete":
                                               [100 + i * 0.01 for i in range(16)] +
                                               [1000 + i for i in range(14)]}))
        (table,) = analysis.analyze_compare(old, new)
        delta = table.rows[0].delta["ns_per_op"]
        self.assertLess(delta.change, 0)
        self.assertLess(delta.p, 0.05)
        self.assertTrue(delta.new_larger)
        self.assertTrue(tables.verdict_lines(table)[0].startswith("time/op: 0 faster, 1 slower"))

    def test_counts_copied_into_every_repetition_are_one_sample(self):
        # The runner copies a row's one counting process into each of its 6 timed runs: two
        # runs of the same code whose counts differ a little must not read as a change at
        # p=0.001, nor equal counts as "p=1.000" over 6 runs.
        def doc(allocs):
            return synthetic_doc({
                "InsertSingle/new_delete/fresh": ([20, 21, 22, 23, 24, 25],
                                                  {"allocs_per_op": allocs, "bytes_per_op": 700}),
                "InsertSingle/a/pooled": ([10, 11, 12, 13, 14, 15],
                                          {"allocs_per_op": 0.6, "bytes_per_op": 14})})
        old, new = results.from_json(doc(1.05)), results.from_json(doc(1.0))
        (table,) = analysis.analyze_compare(old, new)
        g = tables.grid(table)
        base = next(c for c in g.rows if c[0] == "new_delete/fresh")
        self.assertEqual((base[g.headers.index("new allocs/op") + 1],
                          base[g.headers.index("new B/op") + 1]),
                         ("-4.76% (counted once)", "= (counted once)"), base)
        self.assertIn("allocs/op and B/op: counted in one process per row",
                      tables.render_all([table]))
        (run,) = analysis.analyze_run(new)
        pooled = next(c for c in tables.grid(run).rows if c[0] == "a/pooled")
        self.assertEqual(pooled[4], "-40.00% (counted once)")
        self.assertEqual(pooled[6], "-98.00% (counted once)")

    def test_rival_ratio_old_and_new(self):
        new_doc = load_fixture()
        old_doc = copy.deepcopy(new_doc)
        for e in old_doc["benchmarks"]:  # OLD: size_class twice as slow
            if e.get("run_name") == "AllocPairs/size_class" and "real_time" in e:
                e["real_time"] *= 2
        pairs = table_of(analysis.analyze_compare(results.from_json(old_doc),
                                                  results.from_json(new_doc)), "AllocPairs")
        g = tables.grid(pairs)
        self.assertEqual(g.headers[-2:], ["old vs mimalloc_plain", "new vs mimalloc_plain"])
        row = next(r for r in pairs.rows if r.label == "size_class")
        self.assertEqual((row.old_vs_rival.rounds, row.vs_rival.rounds), (5, 5))
        self.assertAlmostEqual(row.old_vs_rival.median, 2 * row.vs_rival.median)
        cells = next(c for c in g.rows if c[0] == "size_class")
        self.assertEqual(cells[-2:], [tables.format_paired(row.old_vs_rival),
                                      tables.format_paired(row.vs_rival)])
        # The verdict holds each run's rows against the rival, a line each (5 rounds: why not).
        lines = tables.verdict_lines(pairs)
        self.assertIn("OLD against mimalloc_plain: 5 rounds cannot tell a row from it (the "
                      "paired test needs 6: --repetitions 6 or more)", lines)
        self.assertIn("NEW against mimalloc_plain: 5 rounds cannot tell a row from it (the "
                      "paired test needs 6: --repetitions 6 or more)", lines)


class Files(unittest.TestCase):
    def test_csv_html_and_charts(self):
        analyzed = analysis.analyze_run(results.from_json(load_fixture()))
        with tempfile.TemporaryDirectory() as out:
            path = os.path.join(out, "summary.csv")
            summary_csv.write(path, analyzed)
            with open(path, newline="", encoding="utf-8") as f:
                reader = csv.DictReader(f)
                self.assertEqual(reader.fieldnames,
                                 summary_csv.header(phases=("grow", "free90", "remix")))
                records = list(reader)
            self.assertEqual(len(records), sum(len(t.rows) for t in analyzed))
            pooled = next(r for r in records if r["workload"] == "InsertSingle"
                          and r["label"] == "size_class/pooled")
            self.assertEqual(pooled["allocs_per_op_delta_pct"], "-90")
            self.assertEqual(pooled["allocs_per_op_p"], "")  # one count a side: no test
            self.assertLess(float(pooled["ns_per_op_p"]), 0.05)
            self.assertEqual(pooled["baseline"], "new_delete/fresh")
            fresh = next(r for r in records if r["workload"] == "InsertSingle"
                         and r["label"] == "size_class/fresh")
            self.assertEqual((fresh["peak_held_bytes"], fresh["peak_live_bytes"],
                              fresh["held_over_live"], fresh["held_method"], fresh["pareto"]),
                             ("847", "700", "1.21", "upstream", "yes"))
            phases = next(r for r in records if r["workload"] == "AllocPhases"
                          and r["label"] == "size_class")
            self.assertEqual(phases["phase_free90_held_over_live"], "12.1")
            self.assertEqual(fresh["phase_free90_held_bytes"], "")
            # The rival's figures where the table has its row, none where it does not.
            pairs = next(r for r in records if r["workload"] == "AllocPairs"
                         and r["label"] == "size_class")
            row = next(r for r in table_of(analyzed, "AllocPairs").rows
                       if r.label == "size_class")
            self.assertEqual((pairs["ratio_to_rival"], pairs["rival_rounds"],
                              pairs["rival_rounds_faster"], pairs["rival"]),
                             (f"{row.vs_rival.median:.4g}", "5", str(row.vs_rival.faster),
                              "mimalloc_plain"))
            # Five rounds: not tested.
            self.assertEqual((pairs["rival_p"], pairs["rival_call"]), ("", ""))
            self.assertEqual((pooled["ratio_to_rival"], pooled["rival"]), ("", ""))

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
            self.assertIn("<td class=\"num better\">-90.00% (counted once)</td>", page)
            self.assertIn("vs mimalloc_plain: each round", page)
            self.assertIn("against mimalloc_plain: 5 rounds cannot tell a row from it", page)
            # A time-vs-peak-held chart per table, embedded after its table.
            for table in analyzed:
                self.assertIn(charts.memory_key(table.title), chart_paths)
            self.assertEqual(page.count("time/op against peak held, Pareto front marked"),
                             len(analyzed))
            self.assertIn("<th>peak held</th><th>held/live</th>", page)
            self.assertIn("Held and held/live at the end of each phase", page)
            self.assertIn("<th>free90 held/live</th>", page)
            self.assertIn('class="note"', page)


def heap_doc():
    """A merged run as the runner writes it: warm rows, idle runs of the fresh row."""
    def entry(name, ns, heap, rep):
        return {"name": name, "run_name": name, "run_type": "iteration", "real_time": ns,
                "time_unit": "ns", "repetition_index": rep, results.HEAP_FIELD: heap,
                "allocs_per_op": 1.0}
    benchmarks = []
    for rep in range(5):
        benchmarks += [entry("DatagramNoFormatting/new_delete/fresh", 3000 + rep, "warm", rep),
                       entry("DatagramNoFormatting/new_delete/pooled", 900 + rep, "warm", rep)]
    for rep in range(3):
        benchmarks.append(entry("DatagramNoFormatting/new_delete/fresh", 50000 + rep, "idle",
                                rep))
    benchmarks.append(entry("DatagramNoFormatting/monotonic/fresh", 7, "idle", 0))  # idle only
    return {"context": {results.HEAP_STATE_FIELD: "warm",
                        results.HEAP_BACKGROUND_FIELD: "33554432",
                        tables.IDLE_REPETITIONS_FIELD: 3}, "benchmarks": benchmarks}


class HeapState(unittest.TestCase):
    def test_idle_runs_join_their_row_beside_the_warm_time(self):
        result_set = results.from_json(heap_doc())
        self.assertEqual(result_set.heap_state, "warm")
        self.assertEqual(sorted(k.label for k in result_set.rows),
                         ["new_delete/fresh", "new_delete/pooled"])  # no idle-only row
        fresh = next(r for k, r in result_set.rows.items() if k.variant == "fresh")
        self.assertEqual(fresh.values("ns_per_op"), [3000, 3001, 3002, 3003, 3004])
        self.assertEqual(fresh.values(results.IDLE_TIME), [50000, 50001, 50002])
        self.assertEqual(fresh.values("allocs_per_op"), [1.0])  # one count; the idle runs add none

    def test_tables_show_the_idle_time_and_name_the_state(self):
        (table,) = analysis.analyze_run(results.from_json(heap_doc()))
        g = tables.grid(table)
        self.assertEqual(g.headers[1:4], ["time/op", "vs base", "idle time/op"])
        rows = {cells[0]: dict(zip(g.headers, cells)) for cells in g.rows}
        self.assertEqual(rows["new_delete/fresh"]["idle time/op"], "50µs ±0%")
        self.assertEqual(rows["new_delete/pooled"]["idle time/op"], tables.MISSING)
        self.assertIn("warm heap", tables.caption(table))
        text = tables.render_all([table], heap_doc()["context"])
        self.assertTrue(text.startswith("heap state: warm (every row ran beside a 32MiB live "
                                        "background set"), text)
        self.assertIn("idle time/op: the same row in a process with nothing else on its heap, "
                      "3 runs each", text)

    def test_csv_has_the_state_and_both_figures(self):
        (table,) = analysis.analyze_run(results.from_json(heap_doc()))
        records = {r["label"]: r for r in summary_csv.rows(table)}
        fresh = records["new_delete/fresh"]
        self.assertEqual((fresh["heap_state"], fresh["ns_per_op_median"],
                          fresh["idle_ns_per_op_median"], fresh["idle_repetitions"]),
                         ("warm", "3002", "50001", 3))
        self.assertEqual(fresh["idle_over_warm"], "16.66")
        self.assertEqual(records["new_delete/pooled"]["idle_ns_per_op_median"], "")
        header = summary_csv.header()
        self.assertLess(header.index("heap_state"), header.index("label"))
        self.assertIn("idle_ns_per_op_median", header)

    def test_a_run_from_before_the_states_names_none(self):
        result_set = results.from_json(load_fixture())
        self.assertEqual(result_set.heap_state, "")
        tables_list = analysis.analyze_run(result_set)
        self.assertNotIn("idle time/op", tables.grid(tables_list[0]).headers)
        self.assertFalse(tables.render_all(tables_list, result_set.context).startswith("heap"))
        self.assertNotIn("heap", tables.caption(tables_list[0]))

    def test_idle_jobs_are_the_fresh_rows_and_patterns_without_preload(self):
        known = runner.strategy_names(FAKE_BENCH)
        plan = runner.plan(FAKE_BENCH, known, strategy="size_class",
                           workloads=["InsertSingle", "AllocPairs"], preloads=["jemalloc"])
        idle = runner.idle_jobs(plan.jobs, known)
        self.assertEqual([j.display for j in idle], [
            "AllocPairs/size_class [heap=idle]", "AllocPairs/mimalloc_plain [heap=idle]",
            "AllocPairs/new_delete [heap=idle]",
            "AllocPairs/malloc [heap=idle]", "InsertSingle/size_class/fresh [heap=idle]",
            "InsertSingle/new_delete/fresh [heap=idle]", "InsertSingle/malloc/fresh [heap=idle]"])
        self.assertEqual(runner.child_env(heap=runner.IDLE)[runner.HEAP_ENV], "idle")
        self.assertEqual(runner.child_env()[runner.HEAP_ENV], "warm")

    def test_idle_jobs_leave_out_the_threaded_container_rows(self):
        known = ("new_delete", "size_class")
        names = ["ContainerMap/build/new_delete/fresh/manual_time",
                 "ContainerMap/build/new_delete/fresh/manual_time/threads:2",
                 "ContainerMap/build/size_class/pooled/manual_time/threads:2",
                 "AllocMixedShared/new_delete/real_time/threads:2"]
        idle = runner.idle_jobs([runner.Job(name, ()) for name in names], known)
        self.assertEqual([j.name for j in idle], [names[0], names[3]])

    def test_idle_runs_share_the_rounds_of_their_table(self):
        known = runner.strategy_names(FAKE_BENCH)
        plan = runner.plan(FAKE_BENCH, known, strategy="size_class",
                           workloads=["InsertSingle"], preloads=[])
        idle = runner.idle_jobs(plan.jobs, known)
        steps = runner.schedule(plan.jobs + idle, 4, known, seed=3, idle_repetitions=2)
        self.assertEqual(len(steps), 4 * len(plan.jobs) + 2 * len(idle))
        for round_index in range(4):
            in_round = [s for s in steps if s.round == round_index]
            self.assertEqual(sum(s.job.heap == runner.IDLE for s in in_round),
                             len(idle) if round_index < 2 else 0)
        # Rounds run in order: idle runs of round 0 come before any warm run of round 1.
        self.assertEqual([s.round for s in steps], sorted(s.round for s in steps))
        self.assertEqual({s.rounds for s in steps if s.job.heap == runner.IDLE}, {2})


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

    def test_a_path_ld_preload_cannot_carry(self):
        # The loader splits LD_PRELOAD at spaces and colons, with no escape.
        self.assertTrue(runner.preloadable("/work/build/bench/libpmrkit_heap_counter.so"))
        self.assertFalse(runner.preloadable("/home/me/my code/build/libpmrkit_heap_counter.so"))
        self.assertFalse(runner.preloadable("/srv/a:b/libpmrkit_heap_counter.so"))

    def test_filter_escape(self):
        self.assertEqual(runner.ere_escape("A/size_class:max=1(K)/fresh"),
                         "A/size_class:max=1\\(K\\)/fresh")

    def test_narrowed_plan_keeps_baseline_and_references(self):
        plan = runner.plan(FAKE_BENCH, runner.strategy_names(FAKE_BENCH), strategy="size_class",
                           workloads=["InsertSingle", "AllocPairs"], preloads=["jemalloc"])
        # The rows of one table run back to back, so they share the machine's load.
        # The preload rows run malloc, and the plain malloc rows come along to compare with.
        self.assertEqual([j.display for j in plan.jobs], [
            "AllocPairs/size_class", "AllocPairs/mimalloc_plain", "AllocPairs/bare_list",
            "AllocPairs/new_delete", "AllocPairs/malloc", "AllocPairs/malloc [preload=jemalloc]",
            "InsertSingle/size_class/fresh", "InsertSingle/size_class/pooled",
            "InsertSingle/limit", "InsertSingle/new_delete/fresh", "InsertSingle/malloc/fresh",
            "InsertSingle/malloc/fresh [preload=jemalloc]"])
        self.assertEqual(plan.jobs[-1].args, ("--strategy=malloc",))
        self.assertEqual(plan.notes, [])

    def test_a_binary_without_malloc_runs_the_preload_rows_on_new_delete(self):
        os.environ["FAKE_BENCH_WITHOUT"] = "malloc"
        try:
            plan = runner.plan(FAKE_BENCH, runner.strategy_names(FAKE_BENCH),
                               workloads=["InsertSingle"], preloads=["jemalloc"])
        finally:
            del os.environ["FAKE_BENCH_WITHOUT"]
        self.assertEqual([(j.display, j.args) for j in plan.jobs if j.preload],
                         [("InsertSingle/new_delete/fresh [preload=jemalloc]",
                           ("--strategy=new_delete",))])
        self.assertIn("has no malloc strategy: the preload rows run new_delete", plan.notes[0])

    def test_schedule_interleaves_the_rows_of_each_table(self):
        known = runner.strategy_names(FAKE_BENCH)
        plan = runner.plan(FAKE_BENCH, known, workloads=["InsertSingle", "AllocPairs"],
                           preloads=["jemalloc"])
        steps = runner.schedule(plan.jobs, 4, known, seed=7)
        self.assertEqual(len(steps), 4 * len(plan.jobs))
        self.assertEqual(steps, runner.schedule(plan.jobs, 4, known, seed=7))  # replayable
        tables_in_order = []
        for step in steps:  # table after table: a table's steps are contiguous
            table = results.parse_name(step.job.name, known).table
            if not tables_in_order or tables_in_order[-1] != table:
                self.assertNotIn(table, tables_in_order)
                tables_in_order.append(table)
        orders = []
        at = 0
        for table in tables_in_order:
            rows = [j for j in plan.jobs if results.parse_name(j.name, known).table == table]
            for round_index in range(4):
                chunk = steps[at:at + len(rows)]
                at += len(rows)
                self.assertEqual({s.round for s in chunk}, {round_index})
                self.assertEqual(sorted(s.job.display for s in chunk),
                                 sorted(j.display for j in rows))  # every row once per round
                orders.append(tuple(s.job.display for s in chunk))
        self.assertGreater(len(set(orders)), len(tables_in_order))  # shuffled anew per round

    def test_unknown_workload_is_an_error_that_lists_the_workloads(self):
        with self.assertRaisesRegex(runner.BenchError, "workloads available: AllocPairs"):
            runner.plan(FAKE_BENCH, runner.strategy_names(FAKE_BENCH), workloads=["Nope"],
                        preloads=[])

    def test_strategies_come_from_the_binary(self):
        listed = runner.list_strategies(FAKE_BENCH)
        self.assertEqual([s["name"] for s in listed][:2], ["new_delete", "malloc"])
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
                 "DatagramNoFormatting", "--no-preload", "--heap-counter",
                 fake_library(out, runner.HEAP_COUNTER)], capture_output=True, text=True,
                timeout=120)
            self.assertEqual(done.returncode, 0, done.stderr)
            # 4 rows, one counting process each first, then 3 runs each, one process per run,
            # the rows of each round shuffled; the two fresh rows once more in an idle process
            # (--quick: one idle run).
            counting = re.findall(r"^\[(\d+)/18\] DatagramNoFormatting/(\S+) \(counting "
                                  r"allocations\)", done.stderr, re.M)
            self.assertEqual([int(at) for at, _ in counting], [1, 2, 3, 4], done.stderr)
            runs = re.findall(r"^\[(\d+)/18\] DatagramNoFormatting/(\S+) \(run (\d)/3\)",
                              done.stderr, re.M)
            self.assertEqual(len(runs), 12, done.stderr)
            idle_runs = re.findall(r"^\[\d+/18\] DatagramNoFormatting/(\S+) \[heap=idle\] "
                                   r"\(run 1/1\)", done.stderr, re.M)
            self.assertEqual(sorted(idle_runs), ["monotonic/fresh", "new_delete/fresh"])
            for round_index in "123":
                self.assertEqual(sorted(row for _, row, r in runs if r == round_index),
                                 ["limit", "monotonic/fresh", "monotonic/pooled",
                                  "new_delete/fresh"])
            self.assertNotIn("preload", done.stderr)
            self.assertIn("monotonic/pooled", done.stdout)
            for name in ("results.json", "summary.csv", "report.html", "tables.txt",
                         "charts/DatagramNoFormatting.png",
                         "charts/memory_DatagramNoFormatting.png"):
                self.assertTrue(os.path.exists(os.path.join(out, name)), name)
            with open(os.path.join(out, "results.json"), encoding="utf-8") as f:
                doc = json.load(f)
            self.assertTrue(doc["context"]["pmrkit_interleaved"])
            self.assertIsInstance(doc["context"]["pmrkit_seed"], int)
            limit = [e["repetition_index"] for e in doc["benchmarks"]
                     if e["name"] == "DatagramNoFormatting/limit"]
            self.assertEqual(sorted(limit), [0, 1, 2])  # one process per run, numbered
            self.assertIn("3 interleaved runs each, warm heap", done.stdout)
            self.assertEqual(doc["context"]["pmrkit_heap_state"], "warm")
            self.assertEqual({e["pmrkit_heap"] for e in doc["benchmarks"]}, {"warm", "idle"})
            self.assertIn("heap state: warm (every row ran beside a 32MiB live background set",
                          done.stdout)
            # Both figures reach the CSV, on the same row: warm time, and idle beside it.
            with open(os.path.join(out, "summary.csv"), encoding="utf-8") as f:
                records = {r["label"]: r for r in csv.DictReader(f)}
            fresh = records["new_delete/fresh"]
            self.assertEqual(fresh["heap_state"], "warm")
            self.assertEqual(fresh["idle_repetitions"], "1")
            self.assertGreater(float(fresh["idle_ns_per_op_median"]),
                               10 * float(fresh["ns_per_op_median"]))  # fake_bench: 20x idle
            self.assertAlmostEqual(float(fresh["idle_over_warm"]), 20, delta=2)
            self.assertEqual(records["monotonic/pooled"]["idle_ns_per_op_median"], "")
            self.assertEqual({r["heap_state"] for r in records.values()}, {"warm"})
            with open(os.path.join(out, "report.html"), encoding="utf-8") as f:
                page = f.read()
            self.assertIn("idle time/op", page)
            self.assertIn("<td>heap state</td><td>warm</td>", page)
                        # The counts of the counting process, in every timed entry; its own
                        # entries not.
            fresh = [e for e in doc["benchmarks"]
                     if e.get("pmrkit_heap", "warm") == "warm"
                     and e["name"] in ("DatagramNoFormatting/monotonic/fresh/manual_time",
                                       "DatagramNoFormatting/monotonic/fresh")]
            self.assertEqual(len(fresh), 3)
            self.assertEqual({e.get("allocs_per_op") for e in fresh}, {1.0})
            self.assertNotIn(runner.HEAP_COUNTER, doc["context"]["fake_ld_preload"])

    def test_without_a_heap_counter_the_rows_have_no_counts_and_the_run_says_why(self):
        with tempfile.TemporaryDirectory() as out:
            missing = os.path.join(out, "nowhere", runner.HEAP_COUNTER)
            done = subprocess.run(
                [sys.executable, os.path.join(REPORT, "run.py"), "--bench", FAKE_BENCH,
                 "--out", out, "--quick", "--repetitions", "1", "--workload", "InsertSingle",
                 "--strategy", "monotonic", "--no-preload", "--heap-counter", missing],
                capture_output=True, text=True, timeout=120)
            self.assertEqual(done.returncode, 0, done.stderr)
            self.assertIn(f"allocs/op and B/op not measured: no heap counter at {missing}",
                          done.stderr)
            self.assertNotIn("counting allocations", done.stderr)
            with open(os.path.join(out, "results.json"), encoding="utf-8") as f:
                entries = json.load(f)["benchmarks"]
            self.assertTrue(entries)
            self.assertFalse([e["name"] for e in entries if "allocs_per_op" in e])

    def test_the_counter_is_preloaded_in_front_of_the_rows_allocator(self):
        with tempfile.TemporaryDirectory() as tmp:
            counter = fake_library(tmp, runner.HEAP_COUNTER)
            allocator = fake_library(tmp, "libjemalloc.so.2")
            job = runner.Job("AllocPairs/malloc", ("--strategy=malloc",), "jemalloc", allocator)
            out_path = os.path.join(tmp, "run.json")
            counted, failure = runner.run_one(FAKE_BENCH, job, 1, 0.001, out_path, counter)
            self.assertIsNone(failure)
            self.assertEqual(counted["context"]["fake_ld_preload"], f"{counter}:{allocator}")
            self.assertEqual(counted["benchmarks"][0]["allocs_per_op"], 1.0)
            timed, failure = runner.run_one(FAKE_BENCH, job, 1, 0.001, out_path)
            self.assertIsNone(failure)
            self.assertEqual(timed["context"]["fake_ld_preload"], allocator)
            self.assertNotIn("allocs_per_op", timed["benchmarks"][0])

    def test_counts_go_to_the_timed_entries_of_the_same_row(self):
        with tempfile.TemporaryDirectory() as tmp:
            counter = fake_library(tmp, runner.HEAP_COUNTER)
            jobs = [runner.Job("AllocPairs/new_delete", ()), runner.Job("AllocPairs/monotonic", ()),
                    runner.Job("AllocPairs/malloc", ("--strategy=malloc",), "jemalloc",
                               fake_library(tmp, "libjemalloc.so.2"))]
            known = runner.strategy_names(FAKE_BENCH)
            steps = runner.schedule(jobs, 2, known, seed=3, counting=True)
            self.assertEqual([s.counting for s in steps], [True] * 3 + [False] * 6)
            outcome = runner.run(FAKE_BENCH, steps, 0.001, Progress(len(steps), 0.1, io.StringIO()),
                                 counter)
            self.assertEqual(outcome.failures, [])
            by_name = {}
            for e in outcome.doc["benchmarks"]:
                by_name.setdefault(e["name"], []).append(e.get("allocs_per_op"))
            self.assertEqual(by_name, {"AllocPairs/new_delete": [1.0, 1.0],
                                       "AllocPairs/monotonic": [0.0, 0.0],
                                       "AllocPairs/malloc [preload=jemalloc]": [1.0, 1.0]})


class InProcess(unittest.TestCase):
    """The container ops in one process (in_process.py): what run.py asks pmrkit_interleaved
    for, and how its results read in the tables and the HTML report."""

    KNOWN = ("new_delete", "malloc", "size_class", "checked")
    DOC = {"tool": "pmrkit_interleaved", "rounds": 5, "seed": 7, "warm": False,
           "reference": "mimalloc_plain", "phases": ["build", "read", "destroy"],
           "workloads": [{"name": "Map", "subjects": [
               {"name": "mimalloc_plain", "median_seconds": [0.004, 0.003, 0.0025]},
               {"name": "size_class", "median_seconds": [0.0042, 0.003, 0.002],
                "median_ratio": [1.05, 1.0, 0.8], "faster": [1, 2, 5], "slower": [4, 2, 0],
                "p": [0.375, 1.0, 0.0625]},
               {"name": "size_class/fresh", "median_seconds": [0.008, 0.003, 0.003],
                "median_ratio": [2.0, 1.01, 1.2], "faster": [0, 2, 0], "slower": [5, 3, 5],
                "p": [0.0625, 1.0, 0.0625]}]}]}

    def test_each_strategy_pooled_and_fresh_beside_mimalloc_plain_in_a_process(self):
        names = ["AllocPairs/size_class", "ContainerMap/build/size_class/pooled/manual_time",
                 "ContainerMap/build/size_class/fresh/manual_time",
                 "ContainerMap/build/size_class/shared/manual_time",
                 "ContainerMap/build/mimalloc_plain/pooled/manual_time",
                 "ContainerMap/build/checked/pooled/manual_time",
                 "ContainerMap/build/malloc/fresh/manual_time [preload=jemalloc]",
                 "ContainerDocument/read/new_delete/fresh/manual_time"]
        workloads, processes = in_process.subjects_of(names, self.KNOWN)
        self.assertEqual(workloads, ["Map", "Document"])
        # checked is left out (it validates every call); a preload row is not a strategy of
        # the process; mimalloc_plain is the reference, first in each process; a strategy's
        # shared rows get a process of their own, after its pooled and fresh ones.
        self.assertEqual(processes, [["mimalloc_plain", "size_class", "size_class/fresh"],
                                     ["mimalloc_plain", "size_class/shared"],
                                     ["mimalloc_plain", "new_delete", "new_delete/fresh"]])
        self.assertEqual(in_process.subjects_of(["AllocPairs/size_class"], self.KNOWN),
                         ([], []))

    def test_a_shared_subject_keeps_its_variant(self):
        doc = copy.deepcopy(self.DOC)
        shared = copy.deepcopy(doc["workloads"][0]["subjects"][1])
        shared["name"] = "size_class/shared"
        doc["workloads"][0]["subjects"].append(shared)
        [(_, _, grid)] = in_process.grids(doc)
        self.assertEqual([r[0] for r in grid.rows],
                         ["mimalloc_plain/pooled", "size_class/pooled", "size_class/fresh",
                          "size_class/shared"])

    def test_command(self):
        self.assertEqual(in_process.command("tool", ["Map"], ["mimalloc_plain", "size_class"],
                                            11, 3, "out.json"),
                         ["tool", "--rounds", "11", "--seed", "3", "--json", "out.json",
                          "--workload", "Map", "mimalloc_plain", "size_class"])

    def test_table_reads_as_the_tool_prints_it(self):
        [(title, caption, grid)] = in_process.grids(self.DOC)
        self.assertEqual(title, "ContainerMap in one process")
        self.assertIn("5 rounds", caption)
        self.assertIn("seed 7", caption)
        self.assertEqual(grid.headers, ["strategy/variant", "build", "read", "destroy"])
        self.assertEqual([r[0] for r in grid.rows],
                         ["mimalloc_plain/pooled", "size_class/pooled", "size_class/fresh"])
        self.assertEqual(grid.rows[0][1:], ["4ms", "3ms", "2.5ms"])
        self.assertEqual(grid.rows[1][1:], ["1.050 (1/5) p=0.375", "1.000 (2/5) p=1.000",
                                            "0.800 (5/5) p=0.062"])
        text = in_process.render(self.DOC)
        self.assertIn("ContainerMap in one process", text)
        self.assertRegex(text, r"\n  size_class/fresh +2\.000 \(0/5\) p=0\.062  1\.010")
        self.assertEqual(in_process.render(None), "")

    def test_csv_row_per_workload_subject_and_phase(self):
        with tempfile.TemporaryDirectory() as d:
            path = os.path.join(d, in_process.CSV_NAME)
            in_process.write_csv(path, self.DOC)
            with open(path, newline="", encoding="utf-8") as f:
                rows = list(csv.DictReader(f))
        self.assertEqual(len(rows), 3 * 3)
        self.assertEqual(list(rows[0]), in_process.CSV_COLUMNS)
        reference, pooled_build = rows[0], rows[3]
        self.assertEqual((reference["strategy"], reference["variant"], reference["phase"]),
                         ("mimalloc_plain", "pooled", "build"))
        self.assertEqual(reference["ratio_to_reference"], "")
        self.assertEqual({k: pooled_build[k] for k in
                          ("workload", "strategy", "variant", "phase", "rounds", "processes",
                           "ratio_to_reference", "rounds_faster", "rounds_slower",
                           "sign_test_p", "median_seconds", "reference_median_seconds")},
                         {"workload": "ContainerMap", "strategy": "size_class",
                          "variant": "pooled", "phase": "build", "rounds": "5",
                          "processes": "1", "ratio_to_reference": "1.05", "rounds_faster": "1",
                          "rounds_slower": "4", "sign_test_p": "0.375",
                          "median_seconds": "0.0042", "reference_median_seconds": "0.004"})
        self.assertEqual(rows[6]["variant"], "fresh")

    def test_html_report_holds_the_table_when_the_context_does(self):
        with tempfile.TemporaryDirectory() as d:
            path = os.path.join(d, "report.html")
            html_report.write(path, "t", [], {}, {in_process.CONTEXT_FIELD: self.DOC}, [])
            with open(path, encoding="utf-8") as f:
                page = f.read()
            self.assertIn("ContainerMap in one process", page)
            self.assertIn("1.050 (1/5) p=0.375", page)
            html_report.write(path, "t", [], {}, {}, [])
            with open(path, encoding="utf-8") as f:
                self.assertNotIn("in one process", f.read())

    def test_two_runs_compared_process_by_process(self):
        old = copy.deepcopy(self.DOC)
        new = copy.deepcopy(self.DOC)
        pooled_old, fresh_old = old["workloads"][0]["subjects"][1:]
        pooled_new, fresh_new = new["workloads"][0]["subjects"][1:]
        # One process a side whose rounds all differ: rounds share their process, so this is
        # no evidence of a change (two unchanged rows once read -16%, p=0.006, this way).
        pooled_old["ratios"] = [[1.08, 1.09, 1.1, 1.11, 1.12], [1.0] * 5, [0.8] * 5]
        pooled_new["ratios"] = [[0.98, 0.99, 1.0, 1.01, 1.02], [1.0] * 5, [0.8] * 5]
        pooled_old["median_ratio"][0], pooled_new["median_ratio"][0] = 1.1, 1.0
        new["workloads"][0]["subjects"].remove(fresh_new)  # NEW ran no fresh row
        [(title, caption, grid)] = in_process.compare_grids(old, new)
        self.assertEqual(title, "ContainerMap in one process")
        self.assertIn("1 processes a strategy", caption)
        rows = {r[0]: r[1:] for r in grid.rows}
        self.assertEqual(list(rows), ["size_class/pooled", "size_class/fresh"])
        self.assertEqual(rows["size_class/pooled"][0], "1.100 → 1.000 untested (1+1 processes)")
        # A row of one run: a dash.
        self.assertEqual(rows["size_class/fresh"][0], "2.000 → —")
        # Four processes a side, every one of NEW below every one of OLD: told apart
        # (4+4: p = 0.029); a phase whose processes match: ~.
        pooled_old["process_median_ratios"] = [[1.09, 1.0, 0.8], [1.1, 1.0, 0.8],
                                               [1.11, 1.0, 0.8], [1.12, 1.0, 0.8]]
        pooled_new["process_median_ratios"] = [[0.98, 1.0, 0.8], [0.99, 1.0, 0.8],
                                               [1.0, 1.0, 0.8], [1.01, 1.0, 0.8]]
        [(_, _, grid)] = in_process.compare_grids(old, new)
        self.assertEqual(grid.rows[0][1:], ["1.100 → 1.000 -9.1% (p=0.029)",
                                            "1.000 → 1.000 ~ (p=1.000)",
                                            "0.800 → 0.800 ~ (p=1.000)"])
        # Three a side, the fewest tested: the smallest p is 0.1, so never a change.
        pooled_old["process_median_ratios"].pop()
        pooled_new["process_median_ratios"].pop()
        [(_, _, grid)] = in_process.compare_grids(old, new)
        self.assertEqual(grid.rows[0][1], "1.100 → 1.000 ~ (p=0.100)")
        self.assertEqual(in_process.compare_grids(old, new, ["ContainerDocument"]), [])
        self.assertEqual(len(in_process.compare_grids(old, new, ["containermap/build"])), 1)
        self.assertEqual(in_process.compare_grids(old, None), [])
        self.assertEqual(in_process.render_compare(None, new), "")

    def test_compare_says_what_it_tests(self):
        # Its docstring is its --help; _compare_cell tests the processes' medians.
        doc = " ".join(compare.__doc__.split())
        self.assertIn("U test over the processes' median ratios", doc)
        self.assertNotIn("rounds' ratios", doc)

    def test_a_workload_of_one_run_keeps_its_table(self):
        old = copy.deepcopy(self.DOC)
        new = copy.deepcopy(self.DOC)
        gone = copy.deepcopy(old["workloads"][0])
        gone["name"] = "Document"
        old["workloads"].append(gone)  # NEW ran no ContainerDocument
        titles = [title for title, _, _ in in_process.compare_grids(old, new)]
        self.assertEqual(titles, ["ContainerMap in one process",
                                  "ContainerDocument in one process"])
        [(_, _, grid)] = in_process.compare_grids(old, new, ["ContainerDocument"])
        self.assertEqual([r[:2] for r in grid.rows], [["size_class/pooled", "1.050 → —"],
                                                     ["size_class/fresh", "2.000 → —"]])
        [(_, _, grid)] = in_process.compare_grids(new, old, ["ContainerDocument"])
        self.assertEqual(grid.rows[0][1], "— → 1.050")

    def test_processes_merge_into_one_table(self):
        # A stand-in for the tool: the reference, then each subject at a ratio of 1.5.
        # Its times are the number of subjects past the reference, so each process shows.
        # Its ratios are 1 + seed / 10, so each process of a strategy shows too.
        script = textwrap.dedent("""\
            import json, sys
            a = sys.argv[1:]
            path = a[a.index('--json') + 1]
            ratio = 1 + int(a[a.index('--seed') + 1]) / 10
            ref, *others = [x for i, x in enumerate(a)
                            if not x.startswith('--') and not a[i - 1].startswith('--')]
            r = float(len(others))
            def subject(n):
                return {'name': n, 'median_seconds': [r] * 3, 'median_ratio': [ratio] * 3,
                        'faster': [0] * 3, 'slower': [3] * 3, 'p': [0.25] * 3,
                        'ratios': [[ratio] * 3] * 3}
            reference = {'name': ref, 'median_seconds': [r] * 3}
            doc = {'rounds': 3, 'seed': 1, 'reference': ref,
                   'phases': ['build', 'read', 'destroy'],
                   'workloads': [{'name': 'Map',
                                  'subjects': [reference] + [subject(n) for n in others]}]}
            with open(path, 'w') as f:
                json.dump(doc, f)
            """)
        def run_all(repeats):
            with tempfile.TemporaryDirectory() as d:
                tool = os.path.join(d, "tool")
                with open(tool, "w") as f:
                    f.write(f"#!{sys.executable}\n{script}")
                os.chmod(tool, 0o755)
                return in_process.run_all(tool, ["Map"], [["mimalloc_plain", "a", "a/fresh"],
                                                          ["mimalloc_plain", "b"]], 3, 1, 30,
                                          repeats=repeats)

        merged = run_all(repeats=1)
        self.assertEqual(merged["processes"], 2)
        [workload] = merged["workloads"]
        self.assertEqual([s["name"] for s in workload["subjects"]],
                         ["mimalloc_plain", "a", "a/fresh", "b"])
        # Each subject keeps the reference's times of its own process.
        self.assertEqual([s.get("reference_median_seconds") for s in workload["subjects"]],
                         [None, [2.0] * 3, [2.0] * 3, [1.0] * 3])
        [(_, caption, grid)] = in_process.grids(merged)
        self.assertIn("each strategy in processes of its own with mimalloc_plain, 2 processes",
                      caption)
        self.assertEqual([r[0] for r in grid.rows],
                         ["mimalloc_plain/pooled", "a/pooled", "a/fresh", "b/pooled"])
        # Two processes a strategy (seeds 1 and 2): each subject's rounds pool, its medians
        # stay process by process, and the table counts the rounds of both.
        merged = run_all(repeats=2)
        self.assertEqual((merged["processes"], merged["processes_per_strategy"],
                          merged["rounds"], merged["rounds_per_process"]), (4, 2, 6, 3))
        [workload] = merged["workloads"]
        self.assertEqual([s["name"] for s in workload["subjects"]],
                         ["mimalloc_plain", "a", "a/fresh", "b"])
        a = workload["subjects"][1]
        self.assertEqual(a["process_median_ratios"], [[1.1] * 3, [1.2] * 3])
        self.assertEqual(a["ratios"][0], [1.1] * 3 + [1.2] * 3)
        self.assertEqual(a["median_ratio"], [1.15] * 3)
        self.assertEqual((a["faster"], a["slower"]), ([0] * 3, [6] * 3))
        self.assertEqual(a["p"], [0.03125] * 3)
        [(_, caption, grid)] = in_process.grids(merged)
        self.assertIn("6 rounds in 2 processes of 3 a strategy (pmrkit_interleaved", caption)
        self.assertIn("seeds 1–2", caption)
        self.assertIn("[processes whose median is below 1 / processes]", caption)
        self.assertEqual(grid.rows[1][1], "1.150 (0/6) p=0.031 [0/2]")
        # Processes on both sides of 1 show it, where the pooled rounds' p cannot.
        merged["workloads"][0]["subjects"][1]["process_median_ratios"][0] = [0.9] * 3
        [(_, _, grid)] = in_process.grids(merged)
        self.assertEqual(grid.rows[1][1], "1.150 (0/6) p=0.031 [1/2]")

    def test_a_tool_that_fails_says_why(self):
        with tempfile.TemporaryDirectory() as d:
            tool = os.path.join(d, "tool")
            with open(tool, "w") as f:
                f.write("#!/bin/sh\necho 'no such strategy' >&2\nexit 2\n")
            os.chmod(tool, 0o755)
            with self.assertRaisesRegex(in_process.InProcessError, "exited 2: no such strategy"):
                in_process.run(tool, ["Map"], ["mimalloc_plain", "x"], 3, 1, timeout=30)
            with open(tool, "w") as f:
                f.write("#!/bin/sh\nexit 0\n")  # writes no results
            with self.assertRaisesRegex(in_process.InProcessError, "no readable results"):
                in_process.run(tool, ["Map"], ["mimalloc_plain", "x"], 3, 1, timeout=30)


def fake_library(directory, name):
    """An empty file named as a library: the dynamic loader skips it with a warning, and
    fake_bench.py reads the name from LD_PRELOAD."""
    path = os.path.join(directory, name)
    open(path, "w").close()
    return path


if __name__ == "__main__":
    unittest.main()
