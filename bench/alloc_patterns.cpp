// Allocator patterns, every strategy: Alloc<Pattern>/<strategy>, plus two reference rows:
// Alloc<Pattern>/bare_list, the floor (bare_list_resource.hpp), and Alloc<Pattern>/mimalloc_plain,
// the plainest wrapper over the same mimalloc the mimalloc strategy loads
// (mimalloc_plain_resource.hpp). Everything goes through the std::pmr::memory_resource*
// interface, as users call it. Each row is a timed pass and a counting pass (bench_support.hpp).
//   AllocPairs        allocate(64) then deallocate, one pair per op
//   AllocBatch        100 x allocate(64), then 100 frees in allocation order; one op = the batch
//   AllocMixed        a live set of 1000 blocks; each op frees a random one and allocates a
//                     random size in 8..4096 in its place
//   AllocMixedShared  AllocMixed on one resource shared by 1, 2, 4, ... threads, up to the
//                     machine's hardware threads (at least 2); every 16th block is swapped
//                     through a shared mailbox, so another thread frees it (cross-thread
//                     frees); more than one thread only for thread-safe strategies (and the
//                     probe that takes frees from other threads)
//   AllocScatter      20,000 blocks of 16..128 bytes allocated one after another, then freed
//                     in a random order, as a node container is destroyed in hash order; one
//                     op = the whole set (items = blocks). Frees far from where they were
//                     allocated are where a pool's bookkeeping costs most (issue 12's destroy).
#include <algorithm>
#include <array>
#include <atomic>
#include <cstdint>
#include <memory>
#include <random>
#include <thread>
#include <vector>

#include "alloc_script.hpp"
#include "bench_support.hpp"
#include "shared_by_threads.hpp"

namespace pmrkit::bench {
namespace {

constexpr std::size_t batch_length = 100;

void alloc_pairs(benchmark::State& state, const std::string& spec) {
  run_row(state, spec, [&](benchmark::State& st, row_pass& pass) {
    strategy_under_test s(spec, pass);
    std::pmr::memory_resource* r = s.resource();
    pass.loop(st, [&] {
      pair_op(r);
      s.recycle_if_needed();
    });
  });
  state.SetItemsProcessed(state.iterations());
}

void alloc_batch(benchmark::State& state, const std::string& spec) {
  run_row(state, spec, [&](benchmark::State& st, row_pass& pass) {
    strategy_under_test s(spec, pass);
    std::pmr::memory_resource* r = s.resource();
    std::array<void*, batch_length> blocks{};
    pass.loop(st, [&] {
      for (auto& b : blocks) b = r->allocate(pair_size, alignof(std::max_align_t));
      benchmark::DoNotOptimize(blocks.data());
      for (auto* b : blocks) r->deallocate(b, pair_size, alignof(std::max_align_t));
      s.recycle_if_needed();
    });
  });
  state.SetItemsProcessed(state.iterations());
}

// AllocScatter's sizes and the order its blocks are freed in, the same for every row.
struct scatter_script {
  static constexpr std::size_t blocks = 20'000;
  std::vector<std::uint32_t> sizes;
  std::vector<std::uint32_t> free_order;
};

const scatter_script& the_scatter_script() {
  static const scatter_script script = [] {
    scatter_script out;
    std::mt19937 random(12);
    std::uniform_int_distribution<std::uint32_t> size(16, 128);
    for (std::size_t i = 0; i < scatter_script::blocks; ++i) {
      out.sizes.push_back(size(random));
      out.free_order.push_back(static_cast<std::uint32_t>(i));
    }
    std::shuffle(out.free_order.begin(), out.free_order.end(), random);
    return out;
  }();
  return script;
}

void alloc_scatter(benchmark::State& state, const std::string& spec) {
  const scatter_script& script = the_scatter_script();
  run_row(state, spec, [&](benchmark::State& st, row_pass& pass) {
    strategy_under_test s(spec, pass);
    std::pmr::memory_resource* r = s.resource();
    std::vector<void*> blocks(scatter_script::blocks);
    pass.loop(st, [&] {
      for (std::size_t i = 0; i < blocks.size(); ++i) blocks[i] = r->allocate(script.sizes[i], 8);
      benchmark::DoNotOptimize(blocks.data());
      for (const std::uint32_t i : script.free_order) r->deallocate(blocks[i], script.sizes[i], 8);
      s.recycle_if_needed();
    });
  });
  state.SetItemsProcessed(state.iterations() * static_cast<std::int64_t>(scatter_script::blocks));
}

struct live_block {
  void* p = nullptr;
  std::uint32_t size = 0;
};

void alloc_mixed(benchmark::State& state, const std::string& spec) {
  run_row(state, spec, [&](benchmark::State& st, row_pass& pass) {
    strategy_under_test s(spec, pass);
    mixed_live_set live(s.resource());
    live.fill();
    pass.loop(st, [&] { live.op(); });
    live.empty();
  });
  state.SetItemsProcessed(state.iterations());
}

// What the threads of one AllocMixedShared run share besides the subject. The function-local
// static is reset by the last thread out, before the next run's threads start.
struct mixed_shared_run {
  shared_by_threads<strategy_under_test> subject;
  std::atomic<int> prefilled{0};
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

// The timed pass runs on every thread of the row; the counting pass on the first thread alone
// (as one thread of one: its blocks cross through the mailbox to itself), with a run of its own.
void alloc_mixed_shared(benchmark::State& state, const std::string& spec) {
  static mixed_shared_run timed_run;
  static mixed_shared_run counting_run;
  run_row(state, spec, [&](benchmark::State& st, row_pass& pass) {
    mixed_shared_run& run = pass.counting() ? counting_run : timed_run;
    const int threads = pass.counting() ? 1 : st.threads();
    const int me = pass.counting() ? 0 : st.thread_index();
    std::pmr::memory_resource* r =
        run.subject
            .join(me, [&] { return std::make_unique<strategy_under_test>(spec, pass); })
            .resource();

    const auto& script = mixed_script();
    std::vector<live_block> live(live_set);
    const std::size_t offset = static_cast<std::size_t>(me) * 7919;  // threads differ in steps
    for (std::size_t i = 0; i < live_set; ++i) {
      const std::uint32_t size = script[(offset + i) & (script_length - 1)].size;
      live[i] = {r->allocate(size, 8), size};
    }
    run.prefilled.fetch_add(1);
    if (me == 0)
      while (run.prefilled.load() < threads) std::this_thread::yield();
    std::size_t at = offset;
    pass.loop(st, [&] {
      const step stp = script[at & (script_length - 1)];
      ++at;
      live_block& b = live[stp.slot];
      r->deallocate(b.p, b.size, 8);
      live_block fresh{r->allocate(stp.size, 8), stp.size};
      if ((at & 15) == 0) {
        // Hand this block to whichever thread next visits the slot; free what was there.
        // at is a multiple of 16 here: every slot, not one in sixteen.
        const std::uint64_t old =
            run.mailbox[(at / 16) % mixed_shared_run::mailbox_slots].block.exchange(
                pack(fresh.p, fresh.size), std::memory_order_acq_rel);
        fresh = old ? unpack(old) : live_block{r->allocate(stp.size, 8), stp.size};
      }
      b = fresh;
      void* kept = b.p;  // a copy: DoNotOptimize on a struct member let GCC drop the store to b
      benchmark::DoNotOptimize(kept);
    });
    // The timing loop ends with a barrier: no thread touches the mailbox any more.
    for (std::size_t i = static_cast<std::size_t>(me); i < mixed_shared_run::mailbox_slots;
         i += static_cast<std::size_t>(threads)) {
      if (const std::uint64_t v = run.mailbox[i].block.exchange(0)) {
        const live_block b = unpack(v);
        r->deallocate(b.p, b.size, 8);
      }
    }
    for (auto& b : live) r->deallocate(b.p, b.size, 8);
    // The subject reports to the first thread's pass when the last thread out detaches it.
    run.subject.leave(me, threads, [&](strategy_under_test& subject) {
      subject.report_and_detach();
      run.prefilled.store(0);
    });
  });
  state.SetItemsProcessed(state.iterations());
}

void register_alloc_patterns() {
  std::vector<std::string> subjects = strategy_specs();
  subjects.insert(subjects.end(), reference_rows.begin(), reference_rows.end());
  subjects.insert(subjects.end(), probe_rows().begin(), probe_rows().end());
  for (const std::string& spec : subjects) {
    const bool is_reference = std::find(reference_rows.begin(), reference_rows.end(), spec) !=
                              reference_rows.end();
    const bool probe = is_probe(spec);  // reuses memory
    const bool reuses = is_reference || probe || reuses_memory(spec);
    benchmark::RegisterBenchmark(("AllocPairs/" + spec).c_str(), alloc_pairs, spec);
    benchmark::RegisterBenchmark(("AllocBatch/" + spec).c_str(), alloc_batch, spec);
    benchmark::RegisterBenchmark(("AllocScatter/" + spec).c_str(), alloc_scatter, spec);
    // A live set on a resource that never reuses memory grows without bound.
    if (!reuses) continue;
    benchmark::RegisterBenchmark(("AllocMixed/" + spec).c_str(), alloc_mixed, spec);
    auto* shared = benchmark::RegisterBenchmark(("AllocMixedShared/" + spec).c_str(),
                                                alloc_mixed_shared, spec);
    shared->UseRealTime()->Threads(1);
    if (is_reference || (probe ? is_thread_safe_probe(spec) : is_thread_safe(spec)))
      for (const int threads : shared_thread_counts()) shared->Threads(threads);
  }
}

const bool registered = add_registrar(register_alloc_patterns);

}  // namespace
}  // namespace pmrkit::bench
