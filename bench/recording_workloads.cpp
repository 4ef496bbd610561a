// The cost of recording (docs/replay.md): AllocPairs and AllocMixed (alloc_patterns.cpp) with a
// recording_resource in front of the strategy, the rows to set beside the same patterns without
// it. Run for new_delete (the tables' baseline) and size_class, or the one --strategy.
//   AllocPairsRecorded    allocate(64) then deallocate through the recorder, one pair per op
//   AllocMixedRecorded    AllocMixed's live set of 1000 random sizes, through the recorder
// (Named Alloc*, so the report treats them as allocator patterns: new_delete is the baseline.)
// The sink discards the stream, so what is measured is the recorder's own work (clock, encoding,
// per-thread buffer, a sink call per 64 KiB); pmrkit::trace's zstd file sink adds its
// compression on top of that (docs/replay.md gives both).
#include "alloc_script.hpp"
#include "bench_support.hpp"
#include "pmrkit/recording_resource.hpp"

namespace pmrkit::bench {
namespace {

class discarding_sink final : public trace_sink {
 public:
  void write(std::span<const std::byte> bytes) override { written += bytes.size(); }
  std::uint64_t written = 0;
};

// A strategy with a recorder in front of it, for one pass of a row.
struct recorded_subject {
  recorded_subject(const std::string& spec, row_pass& pass)
      : strategy(spec, pass), recorder(strategy.resource(), sink) {}
  strategy_under_test strategy;
  discarding_sink sink;
  recording_resource recorder;
};

void record_alloc_pairs(benchmark::State& state, const std::string& spec) {
  std::uint64_t trace_bytes = 0;
  bool timed_pass = true;  // run_row runs the timed pass first: its bytes go with its iterations
  run_row(state, spec, [&](benchmark::State& st, row_pass& pass) {
    recorded_subject s(spec, pass);
    pass.loop(st, [&] { pair_op(&s.recorder); });
    s.recorder.finish();
    if (timed_pass) trace_bytes = s.sink.written;
    timed_pass = false;
  });
  state.SetItemsProcessed(state.iterations());
  state.counters["trace_bytes_per_op"] =
      benchmark::Counter(static_cast<double>(trace_bytes), benchmark::Counter::kAvgIterations);
}

void record_alloc_mixed(benchmark::State& state, const std::string& spec) {
  run_row(state, spec, [&](benchmark::State& st, row_pass& pass) {
    recorded_subject s(spec, pass);
    mixed_live_set live(&s.recorder);
    live.fill();
    pass.loop(st, [&] { live.op(); });
    live.empty();
    s.recorder.finish();
  });
  state.SetItemsProcessed(state.iterations());
}

void register_recording_workloads() {
  const auto& specs = strategy_specs();
  for (const std::string& spec : specs) {
    if (specs.size() > 1 && spec != "new_delete" && spec != "size_class") continue;
    benchmark::RegisterBenchmark(("AllocPairsRecorded/" + spec).c_str(), record_alloc_pairs, spec);
    benchmark::RegisterBenchmark(("AllocMixedRecorded/" + spec).c_str(), record_alloc_mixed, spec);
  }
}

const bool registered = add_registrar(register_recording_workloads);

}  // namespace
}  // namespace pmrkit::bench
