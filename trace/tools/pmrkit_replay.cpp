// pmrkit-replay: replays an allocation trace under strategies and prints a plain table.
//
//   pmrkit-replay TRACE [--strategy SPEC]... [--repetitions N] [--json FILE] [--no-limit]
//   pmrkit-replay TRACE --list-strategies
//
// TRACE is pmrkit's (pmrkit-record, recording_resource) or heaptrack's. Without --strategy, every
// thread-safe registry strategy for a trace with threads alive at once, every strategy otherwise
// (--list-strategies prints that list, one a line). Each row is the best of N replays: time per
// operation, the most the strategy held (peak held: its upstream's peak, or for strategies
// without one the process allocator's, from an extra untimed replay; see held_pass.hpp) and that
// over the trace's peak live bytes. The `limit` row (also `--strategy limit`) replays on a
// resource that does no work: the replayer's own cost. --json FILE (- for stdout) writes every
// repetition as Google-Benchmark-shaped JSON for bench/report (replay_json.hpp).
#include <algorithm>
#include <charconv>
#include <cstdio>
#include <cstdlib>
#include <exception>
#include <fstream>
#include <iostream>
#include <string>
#include <string_view>
#include <system_error>
#include <vector>

#include "held_pass.hpp"
#include "pmrkit/registry.hpp"
#include "pmrkit/trace/replay.hpp"
#include "pmrkit/trace/trace_file.hpp"
#include "replay_json.hpp"

namespace {

using namespace pmrkit::trace;
using pmrkit::trace_tools::replay_row;

constexpr const char* limit_name = "limit";

int usage() {
  std::fprintf(stderr,
               "usage: pmrkit-replay TRACE [--strategy SPEC]... [--repetitions N] [--json FILE] "
               "[--no-limit]\n       pmrkit-replay TRACE --list-strategies\n");
  return 2;
}

const replay_result& best_of(const std::vector<replay_result>& runs) {
  return *std::min_element(runs.begin(), runs.end(),
                           [](const auto& a, const auto& b) { return a.elapsed < b.elapsed; });
}

void print_row(const std::string& name, const replay_result& r, FILE* out) {
  std::fprintf(out, "%-40s %10.1f", name.c_str(), r.ns_per_operation());
  if (r.peak_held_bytes) {
    std::fprintf(out, " %14llu %9.2f\n", static_cast<unsigned long long>(*r.peak_held_bytes),
                 r.peak_live_bytes ? static_cast<double>(*r.peak_held_bytes) /
                                         static_cast<double>(r.peak_live_bytes)
                                   : 0.0);
  } else {
    std::fprintf(out, " %14s %9s\n", "-", "-");
  }
}

// Every repetition of one row; a strategy without an upstream gets its held figure from an
// extra, untimed replay.
replay_row replay_row_of(const replay_plan& plan, const std::string& spec, int repetitions) {
  replay_row row{spec, {}, ""};
  if (spec == limit_name) {
    limit_resource limit;
    for (int i = 0; i < repetitions; ++i) row.runs.push_back(replay(plan, limit));
    return row;
  }
  for (int i = 0; i < repetitions; ++i) row.runs.push_back(replay_strategy(plan, spec));
  row.held_method = pmrkit::trace_tools::held_method_of(spec);
  if (!row.runs.front().peak_held_bytes) {
    const auto held = pmrkit::trace_tools::held_pass(plan, spec);
    for (replay_result& r : row.runs) r.peak_held_bytes = held.peak_held_bytes;
    if (!held.peak_held_bytes) row.held_method.clear();
  }
  return row;
}

}  // namespace

int main(int argc, char** argv) {
  std::string path, json_path;
  std::vector<std::string> specs;
  int repetitions = 3;
  bool with_limit = true, list_only = false;
  for (int i = 1; i < argc; ++i) {
    const std::string arg = argv[i];
    if (arg == "--strategy" && i + 1 < argc) specs.push_back(argv[++i]);
    else if (arg == "--repetitions" && i + 1 < argc) {
      const std::string_view text = argv[++i];
      const auto [end, error] =
          std::from_chars(text.data(), text.data() + text.size(), repetitions);
      if (error != std::errc() || end != text.data() + text.size() || repetitions < 1) {
        std::fprintf(stderr, "pmrkit-replay: --repetitions takes a whole number from 1, not '%s'\n",
                     argv[i]);
        return 2;
      }
    }
    else if (arg == "--json" && i + 1 < argc) json_path = argv[++i];
    else if (arg == "--no-limit") with_limit = false;
    else if (arg == "--list-strategies") list_only = true;
    else if (!arg.starts_with("-") && path.empty()) path = arg;
    else {
      std::fprintf(stderr, "pmrkit-replay: unexpected argument '%s'\n", arg.c_str());
      return usage();
    }
  }
  if (path.empty()) return usage();
  try {
    const recorded_trace trace = read_trace_file(path);
    const replay_plan plan(trace);
    if (specs.empty())
      for (const auto& info : pmrkit::strategies())
        if (info.thread_safe || plan.lanes().size() <= 1) specs.push_back(info.name);
    if (list_only) {
      for (const std::string& spec : specs) std::printf("%s\n", spec.c_str());
      return 0;
    }
    if (with_limit && std::find(specs.begin(), specs.end(), limit_name) == specs.end())
      specs.insert(specs.begin(), limit_name);

    // An unwritable JSON path fails now, not after the whole replay.
    std::ofstream json_file;
    if (!json_path.empty() && json_path != "-") {
      json_file.open(json_path);
      if (!json_file) throw std::runtime_error("cannot write " + json_path);
    }
    // With the JSON on stdout, the table goes to stderr.
    FILE* table = json_path == "-" ? stderr : stdout;
    std::fprintf(
        table,
        "%s: %s, %llu operations on %zu threads, %llu cross-thread frees, peak live %llu bytes\n",
        path.c_str(), trace.format.c_str(), static_cast<unsigned long long>(plan.operations()),
        plan.threads().size(), static_cast<unsigned long long>(plan.cross_thread_frees()),
        static_cast<unsigned long long>(plan.peak_live_bytes()));
    std::fprintf(table, "%-40s %10s %14s %9s\n", "strategy", "ns/op", "peak held B", "held/live");
    std::vector<replay_row> rows;
    int failures = 0;
    for (const std::string& spec : specs) {
      try {
        rows.push_back(replay_row_of(plan, spec, repetitions));
        print_row(spec == limit_name ? "limit (the replayer alone)" : spec,
                  best_of(rows.back().runs), table);
      } catch (const std::exception& e) {
        std::fprintf(table, "%-40s failed: %s\n", spec.c_str(), e.what());
        // Also on stderr when the table is on stdout: a caller that keeps only stderr (the
        // replay report) must still learn why the row failed.
        if (table != stderr)
          std::fprintf(stderr, "pmrkit-replay: %s: %s\n", spec.c_str(), e.what());
        ++failures;
      }
    }
    if (!json_path.empty()) {
      if (json_path == "-") {
        pmrkit::trace_tools::write_benchmark_json(std::cout, path, trace, plan, rows);
      } else {
        pmrkit::trace_tools::write_benchmark_json(json_file, path, trace, plan, rows);
        if (!json_file.flush()) throw std::runtime_error("cannot write " + json_path);
      }
    }
    return failures ? 1 : 0;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "pmrkit-replay: %s\n", e.what());
    return 1;
  }
}
