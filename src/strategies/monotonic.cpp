// Strategy "monotonic": std::pmr::monotonic_buffer_resource, the per-request arena.
#include "strategy.hpp"

namespace pmrkit::detail::strategies {
namespace {

constexpr option_definition option_table[] = {
    size_option("initial_size", 0, 0, std::size_t{1} << 34,
                "bytes of the first buffer; later buffers grow geometrically (0: libstdc++'s "
                "default)"),
};

resource_ptr make(option_reader& options, std::pmr::memory_resource* upstream) {
  const std::size_t initial = options.size("initial_size");
  if (initial == 0) return std::make_unique<std::pmr::monotonic_buffer_resource>(upstream);
  return std::make_unique<std::pmr::monotonic_buffer_resource>(initial, upstream);
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
