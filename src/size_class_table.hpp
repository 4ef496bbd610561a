// Internal: the size classes of size_class_resource.
//
// 8 and 16 bytes, then steps of 16 up to 128, then four classes per power of two up to 1 MiB
// (160, 192, 224, 256, 320, ...), as jemalloc spaces them: a request wastes at most a quarter
// of its block above 128 bytes and at most 15 bytes below. Every power of two from 8 up is a
// class, which is what alignment requests fall back to.
#pragma once

#include <bit>
#include <cstddef>

namespace pmrkit::detail::size_classes {

inline constexpr std::size_t smallest = 8;
inline constexpr std::size_t largest = std::size_t{1} << 20;
// Classes per power of two above 128 bytes, and its log2.
inline constexpr unsigned steps_per_doubling = 4;
inline constexpr unsigned step_bits = 2;
static_assert(steps_per_doubling == 1u << step_bits);
inline constexpr unsigned count = 9 + 13 * steps_per_doubling;  // 8, 16..128, then 2^7..2^20
inline constexpr unsigned none = 255;  // "not pooled": the request goes to upstream

// The class index of a request of `bytes`, 1 <= bytes <= largest.
constexpr unsigned index_of(std::size_t bytes) noexcept {
  if (bytes <= 8) return 0;
  if (bytes <= 128) return static_cast<unsigned>((bytes + 15) >> 4);
  // bytes lies in (2^(width-1), 2^width], which is cut into steps of 2^(width-1-step_bits).
  const auto width = static_cast<unsigned>(std::bit_width(bytes - 1));
  const std::size_t half = std::size_t{1} << (width - 1);
  return 9 + (width - 8) * steps_per_doubling +
         static_cast<unsigned>((bytes - 1 - half) >> (width - 1 - step_bits));
}

constexpr std::size_t size_of(unsigned index) noexcept {
  if (index == 0) return 8;
  if (index <= 8) return std::size_t{index} * 16;
  const std::size_t base = std::size_t{128} << ((index - 9) / steps_per_doubling);
  return base + ((index - 9) % steps_per_doubling + 1) * (base / steps_per_doubling);
}

// Blocks of a class lie at multiples of their size from an aligned chunk start, so this is the
// alignment every block of the class has.
constexpr std::size_t alignment_of(unsigned index) noexcept {
  const std::size_t size = size_of(index);
  return size & (~size + 1);
}

constexpr bool table_is_consistent() {
  if (size_of(count - 1) != largest) return false;
  for (unsigned i = 0; i < count; ++i) {
    const std::size_t size = size_of(i);
    if (index_of(size) != i) return false;
    if (i > 0 && index_of(size_of(i - 1) + 1) != i) return false;
    if (size % 8 != 0 || (i > 0 && size % 16 != 0)) return false;
  }
  for (std::size_t p = smallest; p <= largest; p *= 2)
    if (size_of(index_of(p)) != p) return false;
  return true;
}
static_assert(table_is_consistent());

}  // namespace pmrkit::detail::size_classes
