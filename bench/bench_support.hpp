// Shared pieces of pmrkit_bench: the strategies under test, the two passes every row makes (a
// timed one, then a counting one), and registration of workloads once the command line has
// said which strategies to run.
//
// A row is run_row(state, key, body): body runs twice, each time with a fresh subject.
//   timed pass     the loop of `state`: the strategy's resource is not wrapped, and no heap
//                  counter is loaded in the processes the report times; only a strategy's
//                  upstream is a counting new_delete (for its peak held: a few atomic adds per
//                  chunk or large block, never per pooled call)
//   counting pass  one op uncounted (a pooled row's start-up is memory held, not a cost of
//                  each op), then the same loop, a fraction of the timed pass's iterations long
//                  (at least min(iterations, 4), at least an eighth), with the resource behind
//                  a wrapper that tracks bytes live at the pmr interface, and the heap counter
//                  on where it is preloaded (heap_counter.hpp)
// Counters of every row (JSON names): allocs_per_op and bytes_per_op (counting pass, like Go's
// -benchmem; only with the heap counter preloaded: bench/report/runner.py runs one such
// process per row), peak_held_bytes (held_memory.hpp: the most the strategy held over both passes;
// for a row on several threads, over the counting pass alone, like its live bytes),
// peak_live_bytes (counting pass), faults_per_op (the page faults, minor and major, that the
// timed loop took on the row's first thread, per op: a fresh chunk's first touch, or memory
// glibc gave back and the next op takes again); label "held=<method>"; phase workloads add
// phase_<name>_held_bytes and phase_<name>_live_bytes.
#pragma once

#include <benchmark/benchmark.h>

#include <cstdint>
#include <memory>
#include <memory_resource>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "held_memory.hpp"
#include "heap_counter.hpp"
#include "pmrkit/counting_resource.hpp"
#include "pmrkit/function_ref.hpp"
#include "pmrkit/registry.hpp"

namespace pmrkit::bench {

class row_memory;
class live_meter;
class strategy_under_test;

// One pass of a row; see the top of this file.
class row_pass {
 public:
  row_pass(row_memory& memory, benchmark::IterationCount counting_ops)
      : memory_(memory), counting_ops_(counting_ops) {}
  row_pass(const row_pass&) = delete;
  row_pass& operator=(const row_pass&) = delete;

  bool counting() const noexcept { return counting_ops_ > 0; }
  // Runs `op` once per iteration: the timed loop of `state`, or the counting pass's ops.
  template <class Op>
  void loop(benchmark::State& state, Op&& op) {
    if (counting()) {
      // One op first, uncounted: what a pooled row takes to start (its first chunks) is memory
      // it holds, not a cost of each op, and spread over the few ops a slow row counts it
      // read as hundreds of allocations an op.
      op();
      begin_counting();
      for (benchmark::IterationCount i = 0; i < counting_ops_; ++i) op();
      end_counting(static_cast<double>(counting_ops_));
    } else {
      before_timed_loop();
      for (auto _ : state) op();
      after_timed_loop();
    }
  }
  // For rows that drive `state` themselves (the datagram rounds): how many ops the counting
  // pass runs, and the calls to put around them, or around the timed loop.
  benchmark::IterationCount counting_ops() const noexcept { return counting_ops_; }
  void begin_counting();
  void end_counting(double ops);
  void before_timed_loop();
  void after_timed_loop();

  // Phase workloads, counting pass: held and live bytes now, reported as
  // phase_<name>_held_bytes and phase_<name>_live_bytes. A later mark of a name replaces it.
  void mark_phase(const std::string& name);
  // Rows with no allocator (limit): the static buffers they hold and the bytes used of them.
  void hold_static(std::uint64_t held, std::uint64_t live);

 private:
  friend class strategy_under_test;
  row_memory& memory_;
  benchmark::IterationCount counting_ops_;
  strategy_under_test* subject_ = nullptr;
  heap_snapshot counted_from_;
  std::uint64_t faults_before_timed_loop_ = 0;
};

// A long-lived pool for the request arenas of the shared rows (container_workloads.cpp): a
// service that makes a resource per request over one pool that outlives them, so that what an
// arena returns when it goes is kept for the next, not handed to glibc (which trims its heap,
// and the next request faults the pages in again). The pool is a size_class with its default
// options, as a user would make it first, over a counting new_delete: what it holds, all it
// keeps for the next arena included, is the row's held memory. (With max_pooled=1M it would
// also keep the arenas' largest requests, and held 1.7x as much on the UnorderedMap op and
// 3.6x on monotonic's.) Thread-safe: the threaded shared rows share one pool among their
// threads (container_workloads.cpp).
class shared_pool {
 public:
  shared_pool();
  std::pmr::memory_resource* resource() noexcept { return pool_.get(); }
  const counting_resource& below() const noexcept { return below_; }

 private:
  counting_resource below_;
  std::unique_ptr<std::pmr::memory_resource> pool_;
};

// The resource a subject's spec names, over `upstream`: a bench-only reference ("bare_list",
// "mimalloc_plain", which ignore upstream), a design probe (probe_names), or a
// strategy spec for the registry (make_resource, which throws std::invalid_argument naming what
// is allowed).
std::unique_ptr<std::pmr::memory_resource> make_subject(const std::string& spec,
                                                        std::pmr::memory_resource* upstream);

// A strategy built from its spec over a counting upstream (new_delete, or a shared_pool), or a
// bench-only reference: "bare_list" (bare_list_resource.hpp), "mimalloc_plain"
// (mimalloc_plain_resource.hpp) or a design probe (probe_names, sharded_pages_probe.hpp). In a
// counting pass its resource() is behind the live meter.
class strategy_under_test {
 public:
  // `pool`, if given, is the upstream, and what it holds is the subject's held memory.
  strategy_under_test(const std::string& spec, row_pass& pass, shared_pool* pool = nullptr);
  ~strategy_under_test();
  strategy_under_test(const strategy_under_test&) = delete;
  strategy_under_test& operator=(const strategy_under_test&) = delete;

  std::pmr::memory_resource* resource() noexcept { return resource_; }
  // Reports to the pass now, and never again: for a subject that must outlive its pass (see
  // AllocMixedShared). The destructor reports unless this was called.
  void report_and_detach();
  const std::string& spec() const noexcept { return spec_; }
  // For a monotonic resource, which never reuses freed memory: releases everything once it
  // holds more than a bound. Call only where the workload has no live blocks.
  void recycle_if_needed() {
    if (monotonic_ && upstream_.stats().bytes_in_use > recycle_threshold) monotonic_->release();
  }
  // Bytes held now (upstream and bare_list: exact; process allocators: their probe) and bytes
  // live at the pmr interface (counting pass only; 0 in the timed pass).
  std::uint64_t held_bytes_now() const;
  std::uint64_t live_bytes_now() const;

 private:
  static constexpr std::uint64_t recycle_threshold = 256u << 20;
  std::uint64_t own_held_peak() const;
  std::string spec_;
  row_pass& pass_;
  shared_pool* pool_;
  counting_resource upstream_;
  std::unique_ptr<std::pmr::memory_resource> owned_;
  std::unique_ptr<live_meter> meter_;  // counting pass only
  std::pmr::memory_resource* resource_ = nullptr;
  std::pmr::monotonic_buffer_resource* monotonic_ = nullptr;
  bool detached_ = false;
};

// The bench-only reference rows of the allocator patterns, which strategy_under_test also
// builds: the floor, and the plainest wrapper over the privately loaded mimalloc.
inline const std::vector<std::string> reference_rows = {"bare_list", "mimalloc_plain"};

// The design probes (sharded_pages_probe.hpp), which strategy_under_test also builds, in its
// six geometries. Their rows (the container workloads and the allocator patterns) are
// registered only when pmrkit_bench runs with --pmrkit_probes: probe_rows() is then
// probe_names, else empty.
inline const std::vector<std::string> probe_names = {
    "sharded_pages_probe", "sharded_pages_probe_1m", "sharded_pages_probe_grow",
    "sharded_pages_probe_owned", "sharded_pages_probe_chunks", "sharded_pages_probe_owned_chunks",
    "sharded_pages_probe_owned_lean", "sharded_pages_probe_owned_spans"};
bool is_probe(std::string_view key);
// The probes that take frees from other threads (those named ..._owned...); the others are for
// one thread at a time.
bool is_thread_safe_probe(std::string_view key);
const std::vector<std::string>& probe_rows();

// Runs `body` as a timed pass, then (on the row's first thread) as a counting pass, and reports
// the counters. `key`: the strategy spec, "bare_list", "mimalloc_plain", a probe
// or "limit".
void run_row(benchmark::State& state, const std::string& key,
             function_ref<void(benchmark::State&, row_pass&)> body);

// The strategy specs to run (all of strategies(), or the one named with --strategy).
const std::vector<std::string>& strategy_specs();
// The registry as JSON (what --pmrkit_list_strategies=json prints, and bench/report reads):
// an array of {name, summary, thread_safe, uses_upstream, reuses_memory, bound_to_thread,
// options: [{name, kind, default, min and max or allowed, description}]}.
std::string strategies_json(const std::vector<strategy_info>& all);

// True if the spec names a strategy whose allocate/deallocate may be used from many threads.
bool is_thread_safe(const std::string& spec);
// True if the spec names a strategy that reuses freed memory (false for monotonic).
bool reuses_memory(const std::string& spec);

// Writes the JSON context key pmrkit_held_method: a JSON object, as a string, mapping every
// strategy spec to run and the reference rows (bare_list, mimalloc_plain, limit) to the
// held_method_name of how their held memory is measured.
void add_held_method_context();

// Workload files register their benchmarks through this, at static-initialisation time; the
// callbacks run after the command line has been parsed.
using registrar = void (*)();
bool add_registrar(registrar r);
void run_registrars();

// Parses and removes pmrkit's own flags (--strategy=SPEC, --pmrkit_list_strategies[=text|json]).
// Returns false if the program should exit (after listing strategies). Throws
// std::invalid_argument for a bad spec or listing format.
bool parse_pmrkit_flags(int& argc, char** argv);

}  // namespace pmrkit::bench
