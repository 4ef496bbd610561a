// Internal: the size classes of size_class_resource.
//
// 8 and 16 bytes, then steps of 16 up to 128, then four classes per power of two up to 2 KiB
// (160, 192, 224, 256, 320, ...), as jemalloc spaces them, and eight per power of two from
// 2 KiB up to 1 MiB (2304, 2560, ..., 4096, 4608, ...). A request wastes at most 15 bytes
// below 128 bytes, at most a quarter of its block up to 2 KiB and an eighth above: a quarter
// step there is 512 bytes or more per block, and with sizes spread evenly most bytes lie in
// large blocks. Each class also keeps partly used chunks of its own, so finer steps below
// 2 KiB cost more than they save (docs/size_class.md, "Memory held for what is live").
// Every power of two from 8 up is a class, which is what alignment requests fall back to.
#pragma once

#include <array>
#include <bit>
#include <cstddef>
#include <cstdint>

namespace pmrkit::detail::size_classes {

inline constexpr std::size_t smallest = 8;
inline constexpr unsigned largest_width = 20;
inline constexpr std::size_t largest = std::size_t{1} << largest_width;

// log2 of the number of classes in (2^(width-1), 2^width], for width 8 (above 128) and up.
constexpr unsigned step_bits_of(unsigned width) noexcept { return width <= 11 ? 2 : 3; }

// The index of the first class above 2^(width-1).
constexpr unsigned first_index_of(unsigned width) noexcept {
  unsigned index = 9;  // 8, 16..128
  for (unsigned w = 8; w < width; ++w) index += 1u << step_bits_of(w);
  return index;
}

inline constexpr unsigned count = first_index_of(largest_width + 1);
inline constexpr unsigned none = 255;  // "not pooled": the request goes to upstream
static_assert(count < none);

inline constexpr auto first_indices = [] {
  std::array<std::uint8_t, largest_width + 1> first{};
  for (unsigned width = 8; width <= largest_width; ++width)
    first[width] = static_cast<std::uint8_t>(first_index_of(width));
  return first;
}();

// The class index of a request of `bytes`, 1 <= bytes <= largest.
constexpr unsigned index_of(std::size_t bytes) noexcept {
  if (bytes <= 8) return 0;
  if (bytes <= 128) return static_cast<unsigned>((bytes + 15) >> 4);
  // bytes lies in (2^(width-1), 2^width], which is cut into steps of 2^(width-1-step_bits).
  const auto width = static_cast<unsigned>(std::bit_width(bytes - 1));
  const std::size_t half = std::size_t{1} << (width - 1);
  return first_indices[width] +
         static_cast<unsigned>((bytes - 1 - half) >> (width - 1 - step_bits_of(width)));
}

constexpr std::size_t size_of(unsigned index) noexcept {
  if (index == 0) return 8;
  if (index <= 8) return std::size_t{index} * 16;
  unsigned width = 8;
  while (width < largest_width && first_indices[width + 1] <= index) ++width;
  const std::size_t half = std::size_t{1} << (width - 1);
  return half + (index - first_indices[width] + 1) * (half >> step_bits_of(width));
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
