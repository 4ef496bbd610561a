// Real std::pmr containers on every strategy (issue 12): what a user does with a resource is pass
// it to containers, and pays for where the blocks land as much as for each call. The ops
// (UnorderedMap, Map, Document: build, read, destroy) are container_ops.hpp's. Each phase is
// its own benchmark, timed by hand around that phase only, while every op runs all three:
//   Container<Name>/<phase>/<strategy>/<variant>, phase = build | read | destroy
//   fresh   a new resource per op (a request arena): its construction is in build, its
//           destruction, which returns its memory, in destroy
//   pooled  one resource reused by every op (a long-lived service), warmed by one op
//   shared  a new resource per op over one long-lived pool (bench_support.hpp's shared_pool),
//           warmed by one op: a request arena as a service runs it. Only for strategies that
//           take memory from upstream (the others would repeat their fresh row); held is what
//           the pool holds, what it keeps between ops included
// Rows mimalloc_plain: the plainest pmr wrapper over the privately loaded mimalloc (mi_malloc,
// mi_free), as the yardstick the strategies are held to.
// The same rows on every core (.../threads:N, N the largest of shared_thread_counts()): each
// thread runs its own ops; pooled is one resource for all the threads, shared one pool for all
// of them. Their time is the machine's per op (Google Benchmark divides by the threads), their
// memory the counting pass's, on one thread (docs/benchmarks.md, "Container workloads").
// Counters: allocs_per_op and bytes_per_op (heap allocations per op, all phases),
// peak_held_bytes (what the strategy took from a counting upstream at its most; only for
// strategies that use upstream, label held=upstream) and peak_live_bytes (the most bytes the op
// has live at the pmr interface, the same for every strategy).
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "bench_support.hpp"
#include "container_ops.hpp"
#include "shared_by_threads.hpp"
#include "pmrkit/registry.hpp"

namespace pmrkit::bench {
namespace {

// Which thread of how many a pass runs as: the timed pass on every thread of the row, the
// counting pass on the first thread alone, as a run of one (bench_support.hpp).
struct pass_thread {
  int me;
  int threads;
  pass_thread(const benchmark::State& st, const row_pass& pass)
      : me(pass.counting() ? 0 : st.thread_index()), threads(pass.counting() ? 1 : st.threads()) {}
};

// One resource reused by every op, warmed by one op first; on a threaded row, one resource for
// all the threads, each running its own ops on it. Both passes of the row run the same ops
// (bench_support.hpp); only the timed pass reports the phase's time.
void run_pooled(benchmark::State& state, const std::string& spec, container_op op, phase timed) {
  static shared_by_threads<strategy_under_test> timed_subjects;
  static shared_by_threads<strategy_under_test> counting_subjects;
  run_row(state, spec, [&](benchmark::State& st, row_pass& pass) {
    auto& subjects = pass.counting() ? counting_subjects : timed_subjects;
    const pass_thread thread(st, pass);
    strategy_under_test& subject = subjects.join(
        thread.me, [&] { return std::make_unique<strategy_under_test>(spec, pass); });
    std::pmr::memory_resource* r = subject.resource();
    phase_timer warm;
    op(r, warm);
    pass.loop(st, [&] {
      phase_timer timer;
      op(r, timer);
      if (!pass.counting()) st.SetIterationTime(timer.seconds(timed));
      // A monotonic resource starts over between ops; it is never on a threaded row.
      if (thread.threads == 1) subject.recycle_if_needed();
    });
    // The subject reports to the first thread's pass when the last thread out detaches it.
    subjects.leave(thread.me, thread.threads,
                   [](strategy_under_test& s) { s.report_and_detach(); });
  });
}

// One op on a resource of its own, made over `pool` (null: over new_delete): its construction
// counts in build, its destruction (which returns its memory) in destroy. The harness's object
// around it lives on the stack, so that only the resource counts as the row's allocation.
void op_on_own_resource(const std::string& spec, row_pass& pass, shared_pool* pool,
                        container_op op, phase_timer& timer) {
  std::optional<strategy_under_test> subject;
  timer.begin(phase::build);
  subject.emplace(spec, pass, pool);
  timer.end(phase::build);
  op(subject->resource(), timer);
  timer.begin(phase::destroy);
  subject.reset();
  timer.end(phase::destroy);
}

// A resource of its own per op (a request arena) over new_delete.
void run_fresh(benchmark::State& state, const std::string& spec, container_op op, phase timed) {
  // The inputs are made once per process (tens of milliseconds): here, not inside the first
  // timed op, which a short run may consist of (a fresh row has no warm-up op).
  prepare_container_inputs();
  run_row(state, spec, [&](benchmark::State& st, row_pass& pass) {
    pass.loop(st, [&] {
      phase_timer timer;
      op_on_own_resource(spec, pass, nullptr, op, timer);
      if (!pass.counting()) st.SetIterationTime(timer.seconds(timed));
    });
  });
}

// A resource of its own per op over one pool that outlives them all, warmed by one op; on a
// threaded row, one pool for all the threads, each making its own resource per op.
void run_shared(benchmark::State& state, const std::string& spec, container_op op, phase timed) {
  static shared_by_threads<shared_pool> timed_pools;
  static shared_by_threads<shared_pool> counting_pools;
  run_row(state, spec, [&](benchmark::State& st, row_pass& pass) {
    auto& pools = pass.counting() ? counting_pools : timed_pools;
    const pass_thread thread(st, pass);
    shared_pool& pool = pools.join(thread.me, [] { return std::make_unique<shared_pool>(); });
    phase_timer warm;
    op_on_own_resource(spec, pass, &pool, op, warm);
    pass.loop(st, [&] {
      phase_timer timer;
      op_on_own_resource(spec, pass, &pool, op, timer);
      if (!pass.counting()) st.SetIterationTime(timer.seconds(timed));
    });
    pools.leave(thread.me, thread.threads, [](shared_pool&) {});
  });
}

void register_container_workloads() {
  std::vector<std::string> subjects = strategy_specs();
  subjects.push_back("mimalloc_plain");  // the yardstick: the plainest wrapper over mimalloc
  subjects.insert(subjects.end(), probe_rows().begin(), probe_rows().end());
  // The threaded rows: every core busy, each thread running its own ops (one count, not a
  // scaling curve: AllocMixedShared draws that, at a fraction of the cost). Pooled, a resource
  // all the threads share; shared, a resource per op on each thread over one pool; fresh, only
  // the baseline and the rival, which have no resource to share. Not the debugging strategy
  // (checked: 20-60x the time of the others, and in no verdict), nor new_delete pooled (its
  // fresh row is the same calls).
  const int threads = shared_thread_counts().back();
  for (const container_workload& w : container_workloads) {
    for (std::size_t p = 0; p < phase_names.size(); ++p) {
      const auto timed = static_cast<phase>(p);
      for (const std::string& spec : subjects) {
        const std::string base = "Container" + std::string(w.name) + "/" +
                                 std::string(phase_names[p]) + "/" + spec;
        const bool plain = spec == "mimalloc_plain";
        const bool baseline = spec == "new_delete";
        const bool from_registry = !plain && !is_probe(spec);
        const strategy_info info = from_registry ? describe_strategy(spec) : strategy_info{};
        const bool shares = from_registry && info.uses_upstream;
        const bool threaded = plain || (from_registry && info.name != "checked");
        const auto add = [&](const char* variant, auto run, int thread_count) {
          auto* b = benchmark::RegisterBenchmark((base + "/" + variant).c_str(), run, spec, w.op,
                                                 timed);
          b->UseManualTime()->Unit(benchmark::kMicrosecond);
          if (thread_count > 1) b->Threads(thread_count);
        };
        add("fresh", run_fresh, 1);
        add("pooled", run_pooled, 1);
        if (shares) add("shared", run_shared, 1);
        if (!threaded) continue;
        if (plain || baseline) add("fresh", run_fresh, threads);
        if (from_registry && !baseline && info.thread_safe) add("pooled", run_pooled, threads);
        if (shares) add("shared", run_shared, threads);
      }
    }
  }
}

const bool registered = add_registrar(register_container_workloads);

}  // namespace
}  // namespace pmrkit::bench
