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

namespace pmrkit::zstd::detail {

inline std::string error_name(std::size_t code) { return ZSTD_getErrorName(code); }

}  // namespace pmrkit::zstd::detail
