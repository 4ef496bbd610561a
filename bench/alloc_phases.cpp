// A phase-change allocator pattern, every strategy and the reference rows:
//   AllocPhases  one op is one cycle of three phases on a fresh live set:
//     grow    allocate blocks of 8..4096 bytes (every 32nd one 8 KiB..256 KiB) until 32 MiB live
//     free90  free 90% of them, chosen at random
//     remix   allocate a different mix, 16..512 bytes, until 16 MiB are live again
//   then free everything. It shows whether a strategy gives memory back after the free and
//   reuses it for other sizes, and what its chunk granularity costs: the counting pass reports
//   phase_<grow|free90|remix>_held_bytes and _live_bytes at each phase's end (bench_support.hpp).
// items_per_second counts allocations and frees.
#include <algorithm>
#include <cstdint>
#include <numeric>
#include <random>
#include <vector>

#include "bench_support.hpp"

namespace pmrkit::bench {
namespace {

constexpr std::uint64_t grow_target = 32u << 20;
constexpr std::uint64_t remix_target = 16u << 20;
constexpr std::size_t alignment = 8;

struct phase_script {
  std::vector<std::uint32_t> grow_sizes;
  std::vector<std::uint32_t> free_order;  // indices into grow_sizes, 90% of them
  std::vector<std::uint32_t> remix_sizes;
  std::size_t calls_per_cycle() const {
    // every block is allocated once and freed once
    return 2 * (grow_sizes.size() + remix_sizes.size());
  }
};

// The same pseudo-random script for every strategy, so they do identical work.
const phase_script& script() {
  static const phase_script s = [] {
    phase_script out;
    std::mt19937 rng(20240611);
    std::uniform_int_distribution<std::uint32_t> small(8, 4096), large(8192, 256 * 1024),
        remix(16, 512);
    std::uint64_t live = 0;
    for (std::uint32_t i = 0; live < grow_target; ++i) {
      const std::uint32_t size = i % 32 == 31 ? large(rng) : small(rng);
      out.grow_sizes.push_back(size);
      live += size;
    }
    std::vector<std::uint32_t> order(out.grow_sizes.size());
    std::iota(order.begin(), order.end(), 0u);
    std::shuffle(order.begin(), order.end(), rng);
    order.resize(order.size() * 9 / 10);
    out.free_order = std::move(order);
    std::uint64_t kept = live;
    for (std::uint32_t i : out.free_order) kept -= out.grow_sizes[i];
    for (live = kept; live < remix_target;) {
      out.remix_sizes.push_back(remix(rng));
      live += out.remix_sizes.back();
    }
    return out;
  }();
  return s;
}

void alloc_phases(benchmark::State& state, const std::string& spec) {
  const phase_script& plan = script();
  run_row(state, spec, [&](benchmark::State& st, row_pass& pass) {
    strategy_under_test s(spec, pass);
    std::pmr::memory_resource* r = s.resource();
    std::vector<void*> grown(plan.grow_sizes.size());
    std::vector<void*> remixed(plan.remix_sizes.size());
    pass.loop(st, [&] {
      for (std::size_t i = 0; i < grown.size(); ++i)
        grown[i] = r->allocate(plan.grow_sizes[i], alignment);
      benchmark::DoNotOptimize(grown.data());
      pass.mark_phase("grow");
      for (std::uint32_t i : plan.free_order) {
        r->deallocate(grown[i], plan.grow_sizes[i], alignment);
        grown[i] = nullptr;
      }
      pass.mark_phase("free90");
      for (std::size_t i = 0; i < remixed.size(); ++i)
        remixed[i] = r->allocate(plan.remix_sizes[i], alignment);
      benchmark::DoNotOptimize(remixed.data());
      pass.mark_phase("remix");
      for (std::size_t i = 0; i < grown.size(); ++i)
        if (grown[i]) r->deallocate(grown[i], plan.grow_sizes[i], alignment);
      for (std::size_t i = 0; i < remixed.size(); ++i)
        r->deallocate(remixed[i], plan.remix_sizes[i], alignment);
      s.recycle_if_needed();  // every block is freed: a monotonic strategy may reset
    });
  });
  state.SetItemsProcessed(state.iterations() * static_cast<std::int64_t>(plan.calls_per_cycle()));
}

void register_alloc_phases() {
  std::vector<std::string> subjects = strategy_specs();
  subjects.insert(subjects.end(), reference_rows.begin(), reference_rows.end());
  for (const std::string& spec : subjects)
    benchmark::RegisterBenchmark(("AllocPhases/" + spec).c_str(), alloc_phases, spec);
}

const bool registered = add_registrar(register_alloc_phases);

}  // namespace
}  // namespace pmrkit::bench
