// Strategy "new_delete": the no-reuse baseline every comparison starts from.
#include <cstdint>
#include <new>

#include "strategy.hpp"

namespace pmrkit::detail::strategies {
namespace {

// Aligned global operator new/delete, called here as std::pmr::new_delete_resource() calls
// them (libstdc++'s newdel_res_t): forwarding to that resource instead cost the baseline a
// second virtual call on every allocation and free, 25.5 ns an AllocPairs op where the calls
// themselves take 19. A distinct object (rather than the singleton) so that make_resource()
// can hand out ownership and is_equal stays identity.
class new_delete_strategy final : public std::pmr::memory_resource {
  void* do_allocate(std::size_t bytes, std::size_t alignment) override {
    // libstdc++'s aligned operator new rounds a size within `alignment` of SIZE_MAX up past
    // zero and returns a tiny block; no object can exceed PTRDIFF_MAX bytes anyway.
    if (bytes > PTRDIFF_MAX) throw std::bad_alloc();
    return ::operator new(bytes, std::align_val_t(alignment));
  }
  // The unsized form: clang declares the sized one only with -fsized-deallocation, and
  // libstdc++'s sized delete calls this one anyway.
  void do_deallocate(void* p, std::size_t, std::size_t alignment) override {
    ::operator delete(p, std::align_val_t(alignment));
  }
  bool do_is_equal(const std::pmr::memory_resource& other) const noexcept override {
    return this == &other;
  }
};

resource_ptr make(option_reader&, std::pmr::memory_resource*) {
  return std::make_unique<new_delete_strategy>();
}

}  // namespace

extern const strategy_definition new_delete{
    .name = "new_delete",
    .summary = "std::pmr::new_delete_resource(): every allocation goes to the global heap; the "
               "no-reuse baseline",
    .can = {.thread_safe = true, .uses_upstream = false, .reuses_memory = true},
    .options = {},
    .make = make,
};

}  // namespace pmrkit::detail::strategies
