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
// Counters: allocs_per_op and bytes_per_op (heap allocations per op, all phases),
// peak_held_bytes (what the strategy took from a counting upstream at its most; only for
// strategies that use upstream, label held=upstream) and peak_live_bytes (the most bytes the op
// has live at the pmr interface, the same for every strategy).
#include <memory>
#include <string>
#include <vector>

#include "bench_support.hpp"
#include "container_ops.hpp"
#include "pmrkit/registry.hpp"

namespace pmrkit::bench {
namespace {

// One resource reused by every op, warmed by one op first. Both passes of the row run the same
// ops (bench_support.hpp); only the timed pass reports the phase's time.
void run_pooled(benchmark::State& state, const std::string& spec, container_op op, phase timed) {
  run_row(state, spec, [&](benchmark::State& st, row_pass& pass) {
    strategy_under_test subject(spec, pass);
    std::pmr::memory_resource* r = subject.resource();
    phase_timer warm;
    op(r, warm);
    pass.loop(st, [&] {
      phase_timer timer;
      op(r, timer);
      if (!pass.counting()) st.SetIterationTime(timer.seconds(timed));
      subject.recycle_if_needed();  // a monotonic resource starts over between ops
    });
  });
}

// One op on a resource of its own, made over `pool` (null: over new_delete): its construction
// counts in build, its destruction (which returns its memory) in destroy.
void op_on_own_resource(const std::string& spec, row_pass& pass, shared_pool* pool,
                        container_op op, phase_timer& timer) {
  timer.begin(phase::build);
  auto subject = std::make_unique<strategy_under_test>(spec, pass, pool);
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

// A resource of its own per op over one pool that outlives them all, warmed by one op.
void run_shared(benchmark::State& state, const std::string& spec, container_op op, phase timed) {
  run_row(state, spec, [&](benchmark::State& st, row_pass& pass) {
    shared_pool pool;
    phase_timer warm;
    op_on_own_resource(spec, pass, &pool, op, warm);
    pass.loop(st, [&] {
      phase_timer timer;
      op_on_own_resource(spec, pass, &pool, op, timer);
      if (!pass.counting()) st.SetIterationTime(timer.seconds(timed));
    });
  });
}

void register_container_workloads() {
  std::vector<std::string> subjects = strategy_specs();
  subjects.push_back("mimalloc_plain");  // the yardstick: the plainest wrapper over mimalloc
  subjects.insert(subjects.end(), probe_rows().begin(), probe_rows().end());
  for (const container_workload& w : container_workloads) {
    for (std::size_t p = 0; p < phase_names.size(); ++p) {
      const auto timed = static_cast<phase>(p);
      for (const std::string& spec : subjects) {
        const std::string base = "Container" + std::string(w.name) + "/" +
                                 std::string(phase_names[p]) + "/" + spec;
        benchmark::RegisterBenchmark((base + "/fresh").c_str(), run_fresh, spec, w.op, timed)
            ->UseManualTime()
            ->Unit(benchmark::kMicrosecond);
        benchmark::RegisterBenchmark((base + "/pooled").c_str(), run_pooled, spec, w.op, timed)
            ->UseManualTime()
            ->Unit(benchmark::kMicrosecond);
        if (spec == "mimalloc_plain" || is_probe(spec) ||
            !describe_strategy(spec).uses_upstream)
          continue;
        benchmark::RegisterBenchmark((base + "/shared").c_str(), run_shared, spec, w.op, timed)
            ->UseManualTime()
            ->Unit(benchmark::kMicrosecond);
      }
    }
  }
}

const bool registered = add_registrar(register_container_workloads);

}  // namespace
}  // namespace pmrkit::bench
