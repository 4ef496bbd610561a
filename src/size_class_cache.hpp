// Internal: the free lists a thread (or, unsync, the resource) keeps in front of the shared
// store. One LIFO list per class, bounded per class and in total bytes; allocate and free
// touch only this structure in the common case.
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>

#include "size_class_table.hpp"
#include "size_class_thread_directory.hpp"

namespace pmrkit::detail {

template <class Counter>
struct class_cache {
  void* head = nullptr;
  Counter count;  // blocks on the list (stats() reads it from other threads)
  Counter allocations;
  Counter deallocations;
  std::uint32_t limit = 0;       // more than this many on the list: give some back
  std::uint32_t block_size = 0;  // kept here so the fast path touches one line per class
};

template <class Counter>
struct cache_body {
  std::size_t cached_bytes = 0;  // sum over the lists, owner thread only
  std::size_t budget = 0;        // the thread_cache option
  std::array<class_cache<Counter>, size_classes::count> classes{};
};

// A thread's cache for one synchronized resource: the free lists plus the link that ties
// them to the thread and to the resource (see size_class_thread_directory.hpp).
template <class Counter>
struct alignas(64) thread_cache final : cache_link {
  cache_body<Counter> body;
};

}  // namespace pmrkit::detail
