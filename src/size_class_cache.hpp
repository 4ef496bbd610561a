// Internal: the cache layer of size_class, which a thread (or, unsync, the resource) keeps in
// front of the shared store: one free list per class, a LIFO bounded by a limit that adapts
// to how the thread uses the class (as tcmalloc's free-list lengths do). Allocate and free
// touch only one list in the common case.
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>

#include "size_class_policy.hpp"
#include "size_class_table.hpp"

namespace pmrkit::detail {

// One class's list. 32 bytes, so two lists share a cache line and indexing is a shift.
// `count` is 32-bit, unlike `allocations`, which also keeps GCC from fusing their updates into
// one 16-byte access that the next call's 8-byte stores could not forward to.
template <template <class> class Counter>
struct free_list {
  void* head = nullptr;
  Counter<std::uint64_t> allocations;  // frees are derived: blocks out of the store - live
  Counter<std::uint32_t> count;        // blocks on the list (stats() reads it from any thread)
  // More than this many on the list: give some back. Starts at 0 and grows on each refill,
  // doubling up to a batch and then a batch at a time, within the cache's byte budget (see
  // size_class_cache); other classes' refills halve it when the budget runs out.
  std::uint32_t limit = 0;
  std::uint64_t unused_padding = 0;
};
static_assert(sizeof(free_list<plain_counter>) == 32);
static_assert(sizeof(free_list<single_writer_counter>) == 32);

// The lists of every class, for one thread and one resource (unsync: for the resource).
// Invariant: limit_bytes = sum of limit * block size over the classes <= budget, so the
// blocks a cache holds never exceed the budget (by more than the one block being freed)
// without the fast path having to count bytes.
template <template <class> class Counter>
struct size_class_cache {
  size_class_cache() = default;
  explicit size_class_cache(std::size_t budget_bytes) noexcept : budget(budget_bytes) {}

  std::size_t limit_bytes = 0;
  std::size_t budget = 0;          // the thread_cache option
  unsigned steal_cursor = 0;       // where the next search for limit to take back starts
  // Slow paths this cache's thread has taken: a thread that takes none between two sweeps for
  // idle caches is idle (size_class_engine's reclaim_idle_caches).
  Counter<std::uint64_t> slow_paths;
  std::uint64_t slow_paths_at_last_sweep = ~std::uint64_t{0};  // written by sweeps, in turn
  bool sweep_due = false;  // this thread claimed the next sweep: done once this use ends
  // Aligned so that each 32-byte list lies within one cache line.
  alignas(64) std::array<free_list<Counter>, size_classes::count> lists{};
};

}  // namespace pmrkit::detail
