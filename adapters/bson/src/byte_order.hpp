// Internal: little-endian loads and stores of 32-bit wire fields (MongoDB's wire protocol and
// BSON are little-endian whatever the host), for the message header, OP_MSG, OP_COMPRESSED and
// the BSON walk. Callers have checked the bounds.
#pragma once

#include <cstddef>
#include <cstdint>
#include <cstring>

namespace pmrkit::bson::detail {

inline std::uint32_t load_u32(const std::byte* p) noexcept {
  unsigned char b[4];
  std::memcpy(b, p, 4);
  return static_cast<std::uint32_t>(b[0]) | static_cast<std::uint32_t>(b[1]) << 8 |
         static_cast<std::uint32_t>(b[2]) << 16 | static_cast<std::uint32_t>(b[3]) << 24;
}

inline std::int32_t load_i32(const std::byte* p) noexcept {
  return static_cast<std::int32_t>(load_u32(p));
}

inline void store_u32(std::byte* p, std::uint32_t v) noexcept {
  const unsigned char b[4] = {static_cast<unsigned char>(v), static_cast<unsigned char>(v >> 8),
                              static_cast<unsigned char>(v >> 16),
                              static_cast<unsigned char>(v >> 24)};
  std::memcpy(p, b, 4);
}

inline void store_i32(std::byte* p, std::int32_t v) noexcept {
  store_u32(p, static_cast<std::uint32_t>(v));
}

}  // namespace pmrkit::bson::detail
