// Strategies "mimalloc" and "mimalloc_heap": mimalloc, loaded privately (mimalloc_resource).
#include "pmrkit/mimalloc_resource.hpp"
#include "strategy.hpp"

namespace pmrkit::detail::strategies {
namespace {

resource_ptr make_shared_heap(option_reader&, std::pmr::memory_resource*) {
  return std::make_unique<mimalloc_resource>();
}

resource_ptr make_private_heap(option_reader&, std::pmr::memory_resource*) {
  return std::make_unique<mimalloc_heap_resource>();
}

}  // namespace

extern const strategy_definition mimalloc{
    .name = "mimalloc",
    .summary = "mimalloc's mi_malloc/mi_free, mi_malloc_aligned above 16-byte alignment "
               "(library loaded privately, the process allocator is untouched); thread-safe; "
               "ignores upstream",
    .can = {.thread_safe = true, .uses_upstream = false, .reuses_memory = true},
    .options = {},
    .make = make_shared_heap,
};

extern const strategy_definition mimalloc_heap{
    .name = "mimalloc_heap",
    .summary = "a private mimalloc heap, freed all at once when the resource is destroyed; "
               "single-threaded (use it on the thread that created it); ignores upstream",
    .can = {.thread_safe = false,
            .uses_upstream = false,
            .reuses_memory = true,
            .bound_to_thread = true},
    .options = {},
    .make = make_private_heap,
};

}  // namespace pmrkit::detail::strategies
