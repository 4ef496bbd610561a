// Allocator patterns, every strategy: Alloc<Pattern>/<strategy>, plus <Pattern>/bare_list,
// the reference floor (bare_list_resource.hpp). Everything goes through the
// std::pmr::memory_resource* interface, as users call it.
//   AllocPairs        allocate(64) then deallocate, one pair per op
//   AllocBatch        100 x allocate(64), then 100 frees in allocation order; one op = the batch
//   AllocMixed        a live set of 1000 blocks; each op frees a random one and allocates a
//                     random size in 8..4096 in its place
//   AllocMixedShared  AllocMixed on one resource shared by 1 or 2 threads; every 16th block is
//                     swapped through a shared mailbox, so the other thread frees it
//                     (cross-thread frees); threads:2 only for thread-safe strategies
#include <array>
#include <atomic>
#include <cstdint>
#include <memory>
#include <random>
#include <thread>
#include <vector>

#include "bare_list_resource.hpp"
#include "bench_support.hpp"

namespace pmrkit::bench {
namespace {

constexpr std::size_t pair_size = 64;
constexpr std::size_t batch_length = 100;
constexpr std::size_t live_set = 1000;
constexpr std::size_t script_length = 1 << 16;  // precomputed random (slot, size) steps

struct step {
  std::uint32_t slot;
  std::uint32_t size;
};

// The same pseudo-random script for every strategy, so they do identical work.
const std::vector<step>& mixed_script() {
  static const std::vector<step> script = [] {
    std::mt19937 rng(12345);
    std::uniform_int_distribution<std::uint32_t> slot(0, live_set - 1);
    std::uniform_int_distribution<std::uint32_t> size(8, 4096);
    std::vector<step> s(script_length);
    for (auto& st : s) st = {slot(rng), size(rng)};
    return s;
  }();
  return script;
}

// The resource a benchmark runs on: a strategy, or the bare list.
class subject {
 public:
  explicit subject(const std::string& spec) {
    if (spec == "bare_list") {
      bare_ = std::make_unique<bare_list_resource>();
    } else {
      strategy_ = std::make_unique<strategy_under_test>(spec);
    }
  }
  std::pmr::memory_resource* resource() {
    return bare_ ? static_cast<std::pmr::memory_resource*>(bare_.get()) : strategy_->resource();
  }
  void recycle_if_needed() {
    if (strategy_) strategy_->recycle_if_needed();
  }

 private:
  std::unique_ptr<bare_list_resource> bare_;
  std::unique_ptr<strategy_under_test> strategy_;
};

void alloc_pairs(benchmark::State& state, const std::string& spec) {
  subject s(spec);
  std::pmr::memory_resource* r = s.resource();
  alloc_meter meter;
  meter.start();
  for (auto _ : state) {
    void* p = r->allocate(pair_size, alignof(std::max_align_t));
    benchmark::DoNotOptimize(p);
    r->deallocate(p, pair_size, alignof(std::max_align_t));
    s.recycle_if_needed();
  }
  meter.report(state);
  state.SetItemsProcessed(state.iterations());
}

void alloc_batch(benchmark::State& state, const std::string& spec) {
  subject s(spec);
  std::pmr::memory_resource* r = s.resource();
  std::array<void*, batch_length> blocks{};
  alloc_meter meter;
  meter.start();
  for (auto _ : state) {
    for (auto& b : blocks) b = r->allocate(pair_size, alignof(std::max_align_t));
    benchmark::DoNotOptimize(blocks.data());
    for (auto* b : blocks) r->deallocate(b, pair_size, alignof(std::max_align_t));
    s.recycle_if_needed();
  }
  meter.report(state);
  state.SetItemsProcessed(state.iterations());
}

struct live_block {
  void* p = nullptr;
  std::uint32_t size = 0;
};

void alloc_mixed(benchmark::State& state, const std::string& spec) {
  subject s(spec);
  std::pmr::memory_resource* r = s.resource();
  const auto& script = mixed_script();
  std::vector<live_block> live(live_set);
  for (std::size_t i = 0; i < live_set; ++i)
    live[i] = {r->allocate(script[i].size, 8), script[i].size};
  std::size_t at = 0;
  alloc_meter meter;
  meter.start();
  for (auto _ : state) {
    const step st = script[at];
    at = (at + 1) & (script_length - 1);
    live_block& b = live[st.slot];
    r->deallocate(b.p, b.size, 8);
    b = {r->allocate(st.size, 8), st.size};
    void* kept = b.p;  // a copy: DoNotOptimize on a struct member let GCC drop the store to b
    benchmark::DoNotOptimize(kept);
  }
  meter.report(state);
  state.SetItemsProcessed(state.iterations());
  for (auto& b : live) r->deallocate(b.p, b.size, 8);
}

// State shared by the threads of one AllocMixedShared run. The function-local static is reset
// by the last thread out, before the next run's threads start.
struct shared_run {
  std::atomic<subject*> subject_ptr{nullptr};
  std::unique_ptr<subject> owner;
  std::atomic<int> prefilled{0};
  std::atomic<int> finished{0};
  static constexpr std::size_t mailbox_slots = 256;
  // One cache line per slot: packed slots made the threads fight over lines they did not
  // share any block through, and the harness, not the allocator, set the two-thread speed.
  struct alignas(64) slot {
    std::atomic<std::uint64_t> block{0};  // pointer << 16 | size
  };
  std::array<slot, mailbox_slots> mailbox{};
};

std::uint64_t pack(void* p, std::uint32_t size) {
  return (static_cast<std::uint64_t>(reinterpret_cast<std::uintptr_t>(p)) << 16) | size;
}
live_block unpack(std::uint64_t v) {
  return {reinterpret_cast<void*>(static_cast<std::uintptr_t>(v >> 16)),
          static_cast<std::uint32_t>(v & 0xffff)};
}

void alloc_mixed_shared(benchmark::State& state, const std::string& spec) {
  static shared_run run;
  const int threads = state.threads();
  const int me = state.thread_index();
  if (me == 0) {
    run.owner = std::make_unique<subject>(spec);
    run.subject_ptr.store(run.owner.get(), std::memory_order_release);
  }
  subject* s = nullptr;
  while (!(s = run.subject_ptr.load(std::memory_order_acquire))) std::this_thread::yield();
  std::pmr::memory_resource* r = s->resource();

  const auto& script = mixed_script();
  std::vector<live_block> live(live_set);
  const std::size_t offset = static_cast<std::size_t>(me) * 7919;  // threads differ in steps
  for (std::size_t i = 0; i < live_set; ++i) {
    const std::uint32_t size = script[(offset + i) & (script_length - 1)].size;
    live[i] = {r->allocate(size, 8), size};
  }
  run.prefilled.fetch_add(1);
  alloc_meter meter;
  if (me == 0) {
    while (run.prefilled.load() < threads) std::this_thread::yield();
    meter.start();
  }
  std::size_t at = offset;
  for (auto _ : state) {
    const step st = script[at & (script_length - 1)];
    ++at;
    live_block& b = live[st.slot];
    r->deallocate(b.p, b.size, 8);
    live_block fresh{r->allocate(st.size, 8), st.size};
    if ((at & 15) == 0) {
      // Hand this block to whichever thread next visits the slot; free what was there.
      const std::uint64_t old = run.mailbox[at % shared_run::mailbox_slots].block.exchange(
          pack(fresh.p, fresh.size), std::memory_order_acq_rel);
      fresh = old ? unpack(old) : live_block{r->allocate(st.size, 8), st.size};
    }
    b = fresh;
    void* kept = b.p;  // a copy: DoNotOptimize on a struct member let GCC drop the store to b
    benchmark::DoNotOptimize(kept);
  }
  meter.report(state);
  state.SetItemsProcessed(state.iterations());
  // The timing loop ends with a barrier: no thread touches the mailbox any more.
  for (std::size_t i = static_cast<std::size_t>(me); i < shared_run::mailbox_slots;
       i += static_cast<std::size_t>(threads)) {
    if (const std::uint64_t v = run.mailbox[i].block.exchange(0)) {
      const live_block b = unpack(v);
      r->deallocate(b.p, b.size, 8);
    }
  }
  for (auto& b : live) r->deallocate(b.p, b.size, 8);
  if (run.finished.fetch_add(1) + 1 == threads) {
    run.subject_ptr.store(nullptr);
    run.owner.reset();
    run.prefilled.store(0);
    run.finished.store(0);
  }
}

void register_alloc_patterns() {
  std::vector<std::string> subjects = strategy_specs();
  subjects.push_back("bare_list");
  for (const std::string& spec : subjects) {
    const bool reuses = spec == "bare_list" || reuses_memory(spec);
    benchmark::RegisterBenchmark(("AllocPairs/" + spec).c_str(), alloc_pairs, spec);
    benchmark::RegisterBenchmark(("AllocBatch/" + spec).c_str(), alloc_batch, spec);
    // A live set on a resource that never reuses memory grows without bound.
    if (!reuses) continue;
    benchmark::RegisterBenchmark(("AllocMixed/" + spec).c_str(), alloc_mixed, spec);
    auto* shared = benchmark::RegisterBenchmark(("AllocMixedShared/" + spec).c_str(),
                                                alloc_mixed_shared, spec);
    shared->UseRealTime()->Threads(1);
    if (spec == "bare_list" || is_thread_safe(spec)) shared->Threads(2);
  }
}

const bool registered = add_registrar(register_alloc_patterns);

}  // namespace
}  // namespace pmrkit::bench
