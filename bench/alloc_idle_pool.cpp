// A pool of worker threads that go idle after a burst (issue 15), every thread-safe strategy and
// the reference rows:
//   AllocIdlePool  8 workers share one resource. One op: every worker churns a burst (100 live
//     blocks of 8..4096 bytes, 1,000 replacements, then all freed) and parks on a barrier. A
//     service's worker pool does this between requests; eight threads on the project's 2-core
//     machine is the oversubscription such a pool runs with.
//   The time is the wall time of one op (all bursts, the barrier included); items_per_second
//   counts allocations and frees. The counting pass runs the bursts one at a time (the held
//   probes are single-threaded) and reports phase_idle_held_bytes: what the strategy holds
//   with nothing live and every worker parked, the footprint of a pool that has gone quiet.
#include <barrier>
#include <cstdint>
#include <mutex>
#include <random>
#include <thread>
#include <vector>

#include "bench_support.hpp"

namespace pmrkit::bench {
namespace {

constexpr int workers = 8;
constexpr std::size_t live_per_worker = 100;
constexpr std::size_t replacements = 1'000;
constexpr std::size_t alignment = 8;

struct burst_step {
  std::uint32_t slot;
  std::uint32_t size;
};

// The same pseudo-random burst for every strategy; each worker starts at its own offset.
struct burst_script {
  std::vector<std::uint32_t> initial_sizes;
  std::vector<burst_step> steps;
};

const burst_script& script() {
  static const burst_script s = [] {
    burst_script out;
    std::mt19937 rng(20261201);
    std::uniform_int_distribution<std::uint32_t> size(8, 4096);
    std::uniform_int_distribution<std::uint32_t> slot(0, live_per_worker - 1);
    for (std::size_t i = 0; i < live_per_worker * workers; ++i)
      out.initial_sizes.push_back(size(rng));
    for (std::size_t i = 0; i < replacements * workers; ++i)
      out.steps.push_back({slot(rng), size(rng)});
    return out;
  }();
  return s;
}

struct block {
  void* p;
  std::uint32_t size;
};

// `live` is the worker's, made once outside the loop: a vector made per burst was 8 of the
// heap allocations every row counted per op.
void burst(std::pmr::memory_resource* r, int worker, std::vector<block>& live) {
  const burst_script& plan = script();
  const std::size_t first = static_cast<std::size_t>(worker) * live_per_worker;
  for (std::size_t i = 0; i < live_per_worker; ++i) {
    const std::uint32_t size = plan.initial_sizes[first + i];
    live[i] = {r->allocate(size, alignment), size};
  }
  const std::size_t from = static_cast<std::size_t>(worker) * replacements;
  for (std::size_t i = from; i < from + replacements; ++i) {
    block& b = live[plan.steps[i].slot];
    r->deallocate(b.p, b.size, alignment);
    b = {r->allocate(plan.steps[i].size, alignment), plan.steps[i].size};
  }
  benchmark::DoNotOptimize(live.data());
  for (const block& b : live) r->deallocate(b.p, b.size, alignment);
}

void alloc_idle_pool(benchmark::State& state, const std::string& spec) {
  run_row(state, spec, [&](benchmark::State& st, row_pass& pass) {
    strategy_under_test s(spec, pass);
    std::pmr::memory_resource* r = s.resource();
    std::barrier start(workers + 1);
    std::barrier parked(workers + 1);
    std::mutex one_at_a_time;  // counting pass only
    bool stop = false;         // written before `start`, read after it
    std::vector<std::thread> pool;
    for (int w = 0; w < workers; ++w) {
      pool.emplace_back([&, w] {
        std::vector<block> live(live_per_worker);
        for (;;) {
          start.arrive_and_wait();
          if (stop) return;
          if (pass.counting()) {
            const std::lock_guard lock(one_at_a_time);
            burst(r, w, live);
          } else {
            burst(r, w, live);
          }
          parked.arrive_and_wait();
        }
      });
    }
    pass.loop(st, [&] {
      start.arrive_and_wait();
      parked.arrive_and_wait();
      pass.mark_phase("idle");  // every worker parked, nothing live
    });
    stop = true;
    start.arrive_and_wait();
    for (std::thread& t : pool) t.join();
  });
  state.SetItemsProcessed(state.iterations() * workers *
                          static_cast<std::int64_t>(2 * (live_per_worker + replacements)));
}

void register_alloc_idle_pool() {
  std::vector<std::string> subjects;
  for (const std::string& spec : strategy_specs())
    if (is_thread_safe(spec) && reuses_memory(spec)) subjects.push_back(spec);
  subjects.insert(subjects.end(), reference_rows.begin(), reference_rows.end());
  for (const std::string& spec : subjects)
    benchmark::RegisterBenchmark(("AllocIdlePool/" + spec).c_str(), alloc_idle_pool, spec)
        ->UseRealTime()
        ->Unit(benchmark::kMicrosecond);
}

const bool registered = add_registrar(register_alloc_idle_pool);

}  // namespace
}  // namespace pmrkit::bench
