// A process-wide count of heap allocations, for Go-style allocs/op and B/op.
//
// heap_counter.cpp interposes malloc, calloc, realloc, the aligned variants and every form of
// operator new in this executable, so it sees each allocation made by any code in the process
// (our resources' upstreams, libbson, libzstd, libprotobuf, libstdc++), whichever thread makes
// it. It forwards to the next allocator in symbol order, so an LD_PRELOADed allocator
// (jemalloc, tcmalloc, mimalloc) still serves every request. Counting is off unless switched
// on (set_heap_counting): the timed loops run with only a flag test and a forwarding call per
// allocation, and a separate counting pass over the same loop counts. Each thread counts in a
// slot of its own, so counting does not serialise multi-threaded benchmarks.
#pragma once

#include <cstdint>

namespace pmrkit::bench {

struct heap_snapshot {
  std::uint64_t allocations = 0;
  std::uint64_t bytes = 0;
};

// Switches counting on or off for every thread (off at start).
void set_heap_counting(bool on) noexcept;

// Allocations counted so far, summed over all threads.
heap_snapshot heap_allocations() noexcept;

// Counts an allocation that bypasses malloc (a mimalloc strategy's mi_malloc) as a heap
// allocation of the calling thread.
void count_heap_allocation(std::uint64_t bytes) noexcept;

}  // namespace pmrkit::bench
