// The cost of recording (docs/replay.md): AllocPairs and AllocMixed (alloc_patterns.cpp) with a
// recording_resource in front of the strategy, the rows to set beside the same patterns without
// it. Run for new_delete (the tables' baseline) and size_class, or the one --strategy.
//   AllocPairsRecorded    allocate(64) then deallocate through the recorder, one pair per op
//   AllocMixedRecorded    AllocMixed's live set of 1000 random sizes, through the recorder
// (Named Alloc*, so the report treats them as allocator patterns: new_delete is the baseline.)
// The sink discards the stream, so what is measured is the recorder's own work (clock, encoding,
// per-thread buffer, a sink call per 64 KiB); pmrkit::trace's zstd file sink adds its
// compression on top of that (docs/replay.md gives both).
#include <random>
#include <vector>

#include "bench_support.hpp"
#include "pmrkit/recording_resource.hpp"

namespace pmrkit::bench {
namespace {

class discarding_sink final : public trace_sink {
 public:
  void write(std::span<const std::byte> bytes) override { written += bytes.size(); }
  std::uint64_t written = 0;
};

constexpr std::size_t pair_size = 64;
constexpr std::size_t live_set = 1000;

void record_alloc_pairs(benchmark::State& state, const std::string& spec) {
  strategy_under_test strategy(spec);
  discarding_sink sink;
  recording_resource recorder(strategy.resource(), sink);
  std::pmr::memory_resource* r = &recorder;
  alloc_meter meter;
  meter.start();
  for (auto _ : state) {
    void* p = r->allocate(pair_size, alignof(std::max_align_t));
    benchmark::DoNotOptimize(p);
    r->deallocate(p, pair_size, alignof(std::max_align_t));
  }
  meter.report(state);
  recorder.finish();
  state.SetItemsProcessed(state.iterations());
  state.counters["trace_bytes_per_op"] =
      benchmark::Counter(static_cast<double>(sink.written), benchmark::Counter::kAvgIterations);
}

void record_alloc_mixed(benchmark::State& state, const std::string& spec) {
  strategy_under_test strategy(spec);
  discarding_sink sink;
  recording_resource recorder(strategy.resource(), sink);
  std::pmr::memory_resource* r = &recorder;
  std::mt19937 rng(12345);  // the seed of AllocMixed's script
  std::uniform_int_distribution<std::uint32_t> slot_of(0, live_set - 1);
  std::uniform_int_distribution<std::uint32_t> size_of(8, 4096);
  struct step {
    std::uint32_t slot, size;
  };
  std::vector<step> script(1 << 16);
  for (auto& s : script) s = {slot_of(rng), size_of(rng)};
  struct block {
    void* p;
    std::uint32_t size;
  };
  std::vector<block> live(live_set);
  for (std::size_t i = 0; i < live_set; ++i) live[i] = {r->allocate(script[i].size, 8), script[i].size};
  std::size_t at = 0;
  alloc_meter meter;
  meter.start();
  for (auto _ : state) {
    const step s = script[at];
    at = (at + 1) & (script.size() - 1);
    block& b = live[s.slot];
    r->deallocate(b.p, b.size, 8);
    b = {r->allocate(s.size, 8), s.size};
    void* kept = b.p;
    benchmark::DoNotOptimize(kept);
  }
  meter.report(state);
  state.SetItemsProcessed(state.iterations());
  for (auto& b : live) r->deallocate(b.p, b.size, 8);
  recorder.finish();
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
