// Internal: one factory per strategy, each defined beside the resource it builds. A factory
// reads its options through option_reader (which rejects unknown keys afterwards).
#pragma once

#include <memory>
#include <memory_resource>

#include "spec.hpp"

namespace pmrkit::detail {

using resource_ptr = std::unique_ptr<std::pmr::memory_resource>;

resource_ptr make_new_delete(option_reader&, std::pmr::memory_resource* upstream);
resource_ptr make_std_sync_pool(option_reader&, std::pmr::memory_resource* upstream);
resource_ptr make_std_unsync_pool(option_reader&, std::pmr::memory_resource* upstream);
resource_ptr make_monotonic(option_reader&, std::pmr::memory_resource* upstream);
resource_ptr make_boost_pool(option_reader&, std::pmr::memory_resource* upstream);
resource_ptr make_mimalloc(option_reader&, std::pmr::memory_resource* upstream);
resource_ptr make_mimalloc_heap(option_reader&, std::pmr::memory_resource* upstream);
resource_ptr make_size_class(option_reader&, std::pmr::memory_resource* upstream);
resource_ptr make_size_class_unsync(option_reader&, std::pmr::memory_resource* upstream);
resource_ptr make_checked(option_reader&, std::pmr::memory_resource* upstream);

}  // namespace pmrkit::detail
