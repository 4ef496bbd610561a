#include "factories.hpp"
#include "pmrkit/aligned_pool_resource.hpp"

namespace pmrkit::detail {
namespace {

std::pmr::pool_options read_pool_options(option_reader& options) {
  std::pmr::pool_options o;
  // 0 means "implementation default", as in std::pmr::pool_options itself.
  o.max_blocks_per_chunk = options.size("max_blocks_per_chunk", 0, 0, std::size_t{1} << 30);
  o.largest_required_pool_block =
      options.size("largest_required_pool_block", 0, 0, std::size_t{1} << 30);
  return o;
}

}  // namespace

resource_ptr make_std_sync_pool(option_reader& options, std::pmr::memory_resource* upstream) {
  return std::make_unique<aligned_sync_pool_resource>(read_pool_options(options), upstream);
}

resource_ptr make_std_unsync_pool(option_reader& options, std::pmr::memory_resource* upstream) {
  return std::make_unique<aligned_unsync_pool_resource>(read_pool_options(options), upstream);
}

resource_ptr make_monotonic(option_reader& options, std::pmr::memory_resource* upstream) {
  const std::size_t initial = options.size("initial_size", 0, 0, std::size_t{1} << 34);
  if (initial == 0) return std::make_unique<std::pmr::monotonic_buffer_resource>(upstream);
  return std::make_unique<std::pmr::monotonic_buffer_resource>(initial, upstream);
}

}  // namespace pmrkit::detail
