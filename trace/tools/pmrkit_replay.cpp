// pmrkit-replay: replays an allocation trace under strategies and prints a plain table.
//
//   pmrkit-replay TRACE [--strategy SPEC]... [--repetitions N]
//
// TRACE is pmrkit's (pmrkit-record, recording_resource) or heaptrack's. Without --strategy,
// every thread-safe registry strategy for a multi-threaded trace, every strategy otherwise.
// Each row is the best of N replays: time per operation, the most the strategy took from its
// upstream (peak held; "-" for strategies that do not use one) and that over the trace's peak
// live bytes. The `limit` row replays on a resource that does no work: the replayer's own cost.
#include <cstdio>
#include <cstdlib>
#include <exception>
#include <string>
#include <vector>

#include "pmrkit/registry.hpp"
#include "pmrkit/trace/replay.hpp"
#include "pmrkit/trace/trace_file.hpp"

namespace {

using namespace pmrkit::trace;

int usage() {
  std::fprintf(stderr, "usage: pmrkit-replay TRACE [--strategy SPEC]... [--repetitions N]\n");
  return 2;
}

replay_result best_of(int repetitions, const auto& replay_once) {
  replay_result best = replay_once();
  for (int i = 1; i < repetitions; ++i) {
    const replay_result r = replay_once();
    if (r.elapsed < best.elapsed) best = r;
  }
  return best;
}

void print_row(const std::string& name, const replay_result& r) {
  std::printf("%-40s %10.1f", name.c_str(), r.ns_per_operation());
  if (r.peak_held_bytes) {
    std::printf(" %14llu %9.2f\n", static_cast<unsigned long long>(*r.peak_held_bytes),
                r.peak_live_bytes ? static_cast<double>(*r.peak_held_bytes) / static_cast<double>(r.peak_live_bytes) : 0.0);
  } else {
    std::printf(" %14s %9s\n", "-", "-");
  }
}

}  // namespace

int main(int argc, char** argv) {
  std::string path;
  std::vector<std::string> specs;
  int repetitions = 3;
  for (int i = 1; i < argc; ++i) {
    const std::string arg = argv[i];
    if (arg == "--strategy" && i + 1 < argc) specs.push_back(argv[++i]);
    else if (arg == "--repetitions" && i + 1 < argc) repetitions = std::max(1, std::atoi(argv[++i]));
    else if (!arg.starts_with("-") && path.empty()) path = arg;
    else return usage();
  }
  if (path.empty()) return usage();
  try {
    const recorded_trace trace = read_trace_file(path);
    const replay_plan plan(trace);
    if (specs.empty())
      for (const auto& info : pmrkit::strategies())
        if (info.thread_safe || plan.threads().size() == 1) specs.push_back(info.name);

    std::printf("%s: %s, %llu operations on %zu threads, %llu cross-thread frees, peak live %llu bytes\n",
                path.c_str(), trace.format.c_str(), static_cast<unsigned long long>(plan.operations()),
                plan.threads().size(), static_cast<unsigned long long>(plan.cross_thread_frees()),
                static_cast<unsigned long long>(plan.peak_live_bytes()));
    std::printf("%-40s %10s %14s %9s\n", "strategy", "ns/op", "peak held B", "held/live");
    limit_resource limit;
    print_row("limit (the replayer alone)", best_of(repetitions, [&] { return replay(plan, limit); }));
    int failures = 0;
    for (const std::string& spec : specs) {
      try {
        print_row(spec, best_of(repetitions, [&] { return replay_strategy(plan, spec); }));
      } catch (const std::exception& e) {
        std::printf("%-40s failed: %s\n", spec.c_str(), e.what());
        ++failures;
      }
    }
    return failures ? 1 : 0;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "pmrkit-replay: %s\n", e.what());
    return 1;
  }
}
