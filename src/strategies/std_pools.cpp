// Strategies "std_sync_pool" and "std_unsync_pool": the standard pools, through
// aligned_pool_resource (which mends libstdc++'s alignment and upstream-failure defects).
#include "pmrkit/aligned_pool_resource.hpp"
#include "strategy.hpp"

namespace pmrkit::detail::strategies {
namespace {

// 0 means "implementation default", as in std::pmr::pool_options itself.
constexpr option_definition pool_option_table[] = {
    size_option("max_blocks_per_chunk", 0, 0, std::size_t{1} << 30,
                "most blocks a pool takes from upstream at once (0: libstdc++'s default)"),
    size_option("largest_required_pool_block", 0, 0, std::size_t{1} << 30,
                "largest pooled block; larger ones go straight to upstream (0: libstdc++'s "
                "default)"),
};

std::pmr::pool_options read_pool_options(option_reader& options) {
  std::pmr::pool_options o;
  o.max_blocks_per_chunk = options.size("max_blocks_per_chunk");
  o.largest_required_pool_block = options.size("largest_required_pool_block");
  return o;
}

resource_ptr make_sync(option_reader& options, std::pmr::memory_resource* upstream) {
  return std::make_unique<aligned_sync_pool_resource>(read_pool_options(options), upstream);
}

resource_ptr make_unsync(option_reader& options, std::pmr::memory_resource* upstream) {
  return std::make_unique<aligned_unsync_pool_resource>(read_pool_options(options), upstream);
}

}  // namespace

extern const strategy_definition std_sync_pool{
    .name = "std_sync_pool",
    .summary = "std::pmr::synchronized_pool_resource over upstream (alignment-corrected); "
               "thread-safe behind one lock per pool",
    .can = {.thread_safe = true, .uses_upstream = true, .reuses_memory = true},
    .options = pool_option_table,
    .make = make_sync,
};

extern const strategy_definition std_unsync_pool{
    .name = "std_unsync_pool",
    .summary = "std::pmr::unsynchronized_pool_resource over upstream (alignment-corrected); "
               "single-threaded",
    .can = {.thread_safe = false, .uses_upstream = true, .reuses_memory = true},
    .options = pool_option_table,
    .make = make_unsync,
};

}  // namespace pmrkit::detail::strategies
