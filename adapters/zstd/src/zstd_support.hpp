// Internal helpers shared by the zstd adapter's sources.
#pragma once

#define ZSTD_STATIC_LINKING_ONLY  // ZSTD_initStaticCCtx, ZSTD_estimateCCtxSize_usingCParams,
                                  // ZSTD_findDecompressedSize (exported by Debian's libzstd)
#include <zstd.h>
#include <zstd_errors.h>

#include <cstddef>
#include <cstdint>
#include <cstring>
#include <string>

#include "byte_order.hpp"

namespace pmrkit::zstd::detail {

inline std::string error_name(std::size_t code) { return ZSTD_getErrorName(code); }

// Wire fields of the OP_COMPRESSED header, little-endian (the core's helpers).
using pmrkit::detail::load_i32;
using pmrkit::detail::load_u32;
using pmrkit::detail::store_i32;

}  // namespace pmrkit::zstd::detail
