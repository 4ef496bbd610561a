// Internal: the free lists a thread (or, unsync, the resource) keeps in front of the shared
// store. One LIFO list per class, each bounded by a limit that adapts to how the thread uses
// the class (as tcmalloc's free-list lengths do); allocate and free touch only one list in the
// common case.
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>

#include "size_class_policy.hpp"
#include "size_class_table.hpp"
#include "size_class_thread_directory.hpp"

namespace pmrkit::detail {

// 32 bytes, so two lists share a cache line and indexing is a shift. `count` is 32-bit, unlike
// `allocations`, which also keeps GCC from fusing their updates into one 16-byte access that
// the next call's 8-byte stores could not forward to.
template <template <class> class Counter>
struct class_cache {
  void* head = nullptr;
  Counter<std::uint64_t> allocations;  // frees are derived: blocks out of the store - live
  Counter<std::uint32_t> count;        // blocks on the list (stats() reads it from any thread)
  // More than this many on the list: give some back. Starts at 0 and grows by a batch on each
  // refill, within the thread's byte budget (see cache_body).
  std::uint32_t limit = 0;
  std::uint64_t unused_padding = 0;
};

// Invariant: limit_bytes = sum of limit * block size over the classes <= budget, so the
// blocks a cache holds never exceed the budget (by more than the one block being freed)
// without the fast path having to count bytes.
template <template <class> class Counter>
struct cache_body {
  std::size_t limit_bytes = 0;
  std::size_t budget = 0;          // the thread_cache option
  unsigned steal_cursor = 0;       // where the next search for limit to take back starts
  // Aligned so that each 32-byte list lies within one cache line.
  alignas(64) std::array<class_cache<Counter>, size_classes::count> classes{};
};
static_assert(sizeof(class_cache<plain_counter>) == 32);
static_assert(sizeof(class_cache<owner_counter>) == 32);

// A thread's cache for one synchronized resource: the free lists plus the link that ties
// them to the thread and to the resource (see size_class_thread_directory.hpp).
template <template <class> class Counter>
struct alignas(64) thread_cache final : cache_link {
  cache_body<Counter> body;
};

}  // namespace pmrkit::detail
