// Little-endian loads and stores for the wire format (the core's, shared with the zstd adapter).
#pragma once

#include "byte_order.hpp"

namespace pmrkit::bson::detail {
using pmrkit::detail::load_i32;
using pmrkit::detail::load_u32;
using pmrkit::detail::store_i32;
using pmrkit::detail::store_u32;
}  // namespace pmrkit::bson::detail
