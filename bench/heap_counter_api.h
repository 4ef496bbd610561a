// The C API of libpmrkit_heap_counter.so (heap_counter_preload.cpp), which pmrkit_bench looks up
// with dlsym when the library is preloaded (heap_counter.cpp). C linkage and fixed-width types:
// the names are what dlsym finds, and nothing of C++ crosses the boundary.
// Thread-safety: every function may be called from any thread at any time; counts of
// allocations still in flight on other threads may or may not be included in a snapshot.
#pragma once

#include <cstdint>

extern "C" {

// Allocations and bytes requested so far while counting was on, summed over every thread.
void pmrkit_heap_counter_snapshot(std::uint64_t* allocations, std::uint64_t* bytes);
// Switches counting on (nonzero) or off, for every thread; off when the library loads.
void pmrkit_heap_counter_set_counting(int on);
// Counts one allocation of `bytes` for the calling thread (if counting is on), for allocators
// that bypass malloc.
void pmrkit_heap_counter_count(std::uint64_t bytes);

}  // extern "C"
