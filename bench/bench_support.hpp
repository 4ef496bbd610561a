// Shared pieces of pmrkit_bench: the strategies under test, per-op allocation metering, and
// registration of workloads once the command line has said which strategies to run.
#pragma once

#include <benchmark/benchmark.h>

#include <cstdint>
#include <memory>
#include <memory_resource>
#include <string>
#include <vector>

#include "heap_counter.hpp"
#include "pmrkit/counting_resource.hpp"
#include "pmrkit/registry.hpp"

namespace pmrkit::bench {

// A strategy built from its spec over a counting new_delete upstream.
class strategy_under_test {
 public:
  explicit strategy_under_test(const std::string& spec);
  ~strategy_under_test();
  strategy_under_test(const strategy_under_test&) = delete;
  strategy_under_test& operator=(const strategy_under_test&) = delete;

  std::pmr::memory_resource* resource() noexcept { return resource_; }
  const std::string& spec() const noexcept { return spec_; }
  // For a monotonic resource, which never reuses freed memory: releases everything once it
  // holds more than a bound. Call only where the workload has no live blocks.
  void recycle_if_needed() {
    if (monotonic_ && upstream_.stats().bytes_in_use > recycle_threshold) monotonic_->release();
  }

 private:
  static constexpr std::uint64_t recycle_threshold = 256u << 20;
  std::string spec_;
  counting_resource upstream_;
  std::unique_ptr<std::pmr::memory_resource> owned_;
  std::unique_ptr<std::pmr::memory_resource> heap_counted_;  // see bench_support.cpp
  std::pmr::memory_resource* resource_ = nullptr;
  std::pmr::monotonic_buffer_resource* monotonic_ = nullptr;
};

// Measures heap allocations over a timed loop and reports them as the user counters
// allocs_per_op and bytes_per_op (process-wide, all threads; like Go's -benchmem).
class alloc_meter {
 public:
  void start() noexcept { begin_ = heap_allocations(); }
  // `ops` defaults to the iterations of this thread times the number of threads.
  void report(benchmark::State& state, double ops = 0) const;

 private:
  heap_snapshot begin_;
};

// The strategy specs to run (all of strategies(), or the one named with --strategy).
const std::vector<std::string>& strategy_specs();
// The registry as JSON (what --pmrkit_list_strategies=json prints, and bench/report reads):
// an array of {name, summary, thread_safe, uses_upstream, reuses_memory, options: [{name, kind,
// default, min and max or allowed, description}]}.
std::string strategies_json(const std::vector<strategy_info>& all);
// True if the spec names a strategy whose allocate/deallocate may be used from many threads.
bool is_thread_safe(const std::string& spec);
// True if the spec names a strategy that reuses freed memory (false for monotonic).
bool reuses_memory(const std::string& spec);

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
