// A process-wide count of heap allocations, for Go-style allocs/op and B/op, when the process
// runs with the counter preloaded (LD_PRELOAD=libpmrkit_heap_counter.so[:<allocator>.so]).
//
// The counter is a library of its own (heap_counter_preload.cpp) that interposes malloc and
// every operator new of the process and forwards them to the next allocator. pmrkit_bench does
// not link it: the processes whose loops are timed run without any interposer, and
// bench/report/runner.py runs one more process per row, with the counter preloaded, for the
// counts. These functions find the counter's C API (heap_counter_api.h) with dlsym on first use;
// without it they count nothing and heap_counter_present() says so.
// Thread-safe: callable from any thread; each thread counts in a slot of its own.
#pragma once

#include <cstdint>

namespace pmrkit::bench {

struct heap_snapshot {
  std::uint64_t allocations = 0;
  std::uint64_t bytes = 0;
};

// True if libpmrkit_heap_counter.so is loaded into this process.
bool heap_counter_present() noexcept;

// Switches counting on or off for every thread (off at start). No effect without the counter.
void set_heap_counting(bool on) noexcept;

// Allocations counted so far, summed over all threads; zero without the counter.
heap_snapshot heap_allocations() noexcept;

// Counts an allocation that bypasses malloc (a mimalloc strategy's mi_malloc) as a heap
// allocation of the calling thread. No effect without the counter.
void count_heap_allocation(std::uint64_t bytes) noexcept;

}  // namespace pmrkit::bench
