// replay_json: pmrkit-replay's machine-readable output, shaped like Google Benchmark's JSON so
// that the benchmark report (bench/report) reads it as it reads pmrkit_bench's.
//
// One entry per row and repetition, named "Replay_<trace>/<spec>" ("Replay_<trace>/limit" for
// the replayer alone): real_time and cpu_time in ns per operation (cpu_time is the wall time
// too: the replay spans threads), time_unit "ns", run_type "iteration", repetition_index and
// repetitions, iterations = operations; counters peak_held_bytes (absent where unmeasured) and
// peak_live_bytes; label "held=<method>". See docs/replay.md.
#pragma once

#include <cstdint>
#include <optional>
#include <ostream>
#include <string>
#include <vector>

#include "pmrkit/trace/recorded_trace.hpp"
#include "pmrkit/trace/replay.hpp"

namespace pmrkit::trace_tools {

struct replay_row {
  std::string name;  // a spec, or "limit"
  std::vector<trace::replay_result> runs;
  std::string held_method;  // "" when the row measures none
};

// "python_threads" from "tests/trace/data/python_threads.trace": the trace's part of the names.
std::string trace_label(const std::string& path);

void write_benchmark_json(std::ostream& out, const std::string& trace_path,
                          const trace::recorded_trace& trace, const trace::replay_plan& plan,
                          const std::vector<replay_row>& rows);

}  // namespace pmrkit::trace_tools
