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

inline std::uint32_t load_u32(const std::byte* p) noexcept {
  unsigned char b[4];
  std::memcpy(b, p, 4);
  return static_cast<std::uint32_t>(b[0]) | static_cast<std::uint32_t>(b[1]) << 8 |
         static_cast<std::uint32_t>(b[2]) << 16 | static_cast<std::uint32_t>(b[3]) << 24;
}

inline std::int32_t load_i32(const std::byte* p) noexcept {
  return static_cast<std::int32_t>(load_u32(p));
}

inline void store_i32(std::byte* p, std::int32_t v) noexcept {
  const auto u = static_cast<std::uint32_t>(v);
  const unsigned char b[4] = {static_cast<unsigned char>(u), static_cast<unsigned char>(u >> 8),
                              static_cast<unsigned char>(u >> 16),
                              static_cast<unsigned char>(u >> 24)};
  std::memcpy(p, b, 4);
}

}  // namespace pmrkit::zstd::detail
