// Strategy "malloc": the C heap with no pmr layer in between, the row for "no pmr at all".
#include <cstddef>
#include <cstdlib>
#include <new>

#include "strategy.hpp"

namespace pmrkit::detail::strategies {
namespace {

// std::malloc/std::free, and posix_memalign only for alignments malloc does not already give.
// Unlike new_delete (libstdc++'s new_delete_resource calls the aligned operator new for every
// request, so every block goes through glibc's aligned_alloc path, behind one more virtual
// call), a block aligned to max_align_t or less takes malloc's fast path: what a program
// without pmr, or a preloaded allocator's malloc, does. posix_memalign rather than
// aligned_alloc: it takes any size, where C's aligned_alloc wants a multiple of the alignment.
class malloc_strategy final : public std::pmr::memory_resource {
  void* do_allocate(std::size_t bytes, std::size_t alignment) override {
    if (bytes == 0) bytes = 1;  // malloc(0) may answer nullptr, which is not an allocation failure
    void* p = nullptr;
    if (alignment <= alignof(std::max_align_t)) {
      p = std::malloc(bytes);
    } else if (posix_memalign(&p, alignment, bytes) != 0) {
      p = nullptr;
    }
    if (!p) throw std::bad_alloc();
    return p;
  }
  void do_deallocate(void* p, std::size_t, std::size_t) override { std::free(p); }
  bool do_is_equal(const std::pmr::memory_resource& other) const noexcept override {
    return this == &other;
  }
};

resource_ptr make(option_reader&, std::pmr::memory_resource*) {
  return std::make_unique<malloc_strategy>();
}

}  // namespace

extern const strategy_definition malloc{
    .name = "malloc",
    .summary = "std::malloc/std::free (posix_memalign above alignof(max_align_t)): the C heap "
               "with no pmr layer, what a preloaded allocator serves; ignores upstream",
    .can = {.thread_safe = true, .uses_upstream = false, .reuses_memory = true},
    .options = {},
    .make = make,
};

}  // namespace pmrkit::detail::strategies
