// Strategy "monotonic": std::pmr::monotonic_buffer_resource, the per-request arena.
#include <cstdint>
#include <new>

#include "strategy.hpp"

namespace pmrkit::detail::strategies {
namespace {

constexpr option_definition option_table[] = {
    size_option("initial_size", 0, 0, std::size_t{1} << 34,
                "bytes of the first buffer; later buffers grow geometrically (0: libstdc++'s "
                "default)"),
};

// libstdc++ 12 adds its chunk header to the request and rounds it up without checking, so a
// size near SIZE_MAX wraps to a small buffer and the request is "served" from it. No object
// exceeds PTRDIFF_MAX bytes: such requests are refused before the arithmetic.
class bounded_monotonic final : public std::pmr::monotonic_buffer_resource {
 public:
  using monotonic_buffer_resource::monotonic_buffer_resource;

 protected:
  void* do_allocate(std::size_t bytes, std::size_t alignment) override {
    if (bytes > PTRDIFF_MAX) throw std::bad_alloc();
    return monotonic_buffer_resource::do_allocate(bytes, alignment);
  }
};

resource_ptr make(option_reader& options, std::pmr::memory_resource* upstream) {
  const std::size_t initial = options.size("initial_size");
  if (initial == 0) return std::make_unique<bounded_monotonic>(upstream);
  return std::make_unique<bounded_monotonic>(initial, upstream);
}

}  // namespace

extern const strategy_definition monotonic{
    .name = "monotonic",
    .summary = "std::pmr::monotonic_buffer_resource over upstream; single-threaded; deallocate "
               "is a no-op by design, memory returns only when the resource is destroyed",
    .can = {.thread_safe = false, .uses_upstream = true, .reuses_memory = false},
    .options = option_table,
    .make = make,
};

}  // namespace pmrkit::detail::strategies
