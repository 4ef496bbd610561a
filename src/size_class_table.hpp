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
//
// Those are the nominal sizes. A class up to 4 KiB whose blocks leave room at the end of its
// chunk (at the default chunk_size) is then widened to fill it: as many blocks per chunk, each
// larger, so the chunk's tail is not wasted and more requests fit the class (19 blocks of 3328
// bytes leave 2.3 KiB of a 64 KiB chunk unused; 19 of 3440, 64 bytes). Powers of two stay.
//
// A power of two gives a block of its chunk to the header (size_class_chunk.hpp), which for
// 4096 is a sixteenth of every chunk. So 4096 has a companion class just below it, 4080: 16
// blocks that fill the same chunk. Requests of 3841..4080 bytes take it; 4096 itself, and
// alignment 4096, keep their class.
#pragma once

#include <array>
#include <bit>
#include <cstddef>
#include <cstdint>

#include "pmrkit/size_class_resource.hpp"
#include "size_class_chunk.hpp"

namespace pmrkit::detail::size_classes {

inline constexpr std::size_t smallest = 8;
inline constexpr unsigned largest_width = 20;
inline constexpr std::size_t largest = std::size_t{1} << largest_width;

// ---- The spaced sequence: the classes above without the companion.

// log2 of the number of classes in (2^(width-1), 2^width], for width 8 (above 128) and up.
constexpr unsigned step_bits_of(unsigned width) noexcept { return width <= 11 ? 2 : 3; }

// The index of the first class above 2^(width-1).
constexpr unsigned spaced_first_index_of(unsigned width) noexcept {
  unsigned index = 9;  // 8, 16..128
  for (unsigned w = 8; w < width; ++w) index += 1u << step_bits_of(w);
  return index;
}

inline constexpr unsigned spaced_count = spaced_first_index_of(largest_width + 1);

inline constexpr auto spaced_first_indices = [] {
  std::array<std::uint8_t, largest_width + 1> first{};
  for (unsigned width = 8; width <= largest_width; ++width)
    first[width] = static_cast<std::uint8_t>(spaced_first_index_of(width));
  return first;
}();

constexpr unsigned spaced_index_of(std::size_t bytes) noexcept {
  if (bytes <= 8) return 0;
  if (bytes <= 128) return static_cast<unsigned>((bytes + 15) >> 4);
  const auto width = static_cast<unsigned>(std::bit_width(bytes - 1));
  const std::size_t half = std::size_t{1} << (width - 1);
  return spaced_first_indices[width] +
         static_cast<unsigned>((bytes - 1 - half) >> (width - 1 - step_bits_of(width)));
}

constexpr std::size_t spaced_size_of(unsigned index) noexcept {
  if (index == 0) return 8;
  if (index <= 8) return std::size_t{index} * 16;
  unsigned width = 8;
  while (width < largest_width && spaced_first_indices[width + 1] <= index) ++width;
  const std::size_t half = std::size_t{1} << (width - 1);
  return half + (index - spaced_first_indices[width] + 1) * (half >> step_bits_of(width));
}

// ---- The nominal classes: the spaced sequence with the companion inserted.

// The power of two that gets a companion, and the companion's size: the largest multiple of
// 16 of which the power's chunk (at the default chunk_size) holds one block more. Only 4096:
// companions of 1024 and 2048 (1008, 2032) measured no better (docs/size_class.md).
inline constexpr std::size_t companion_power = 4096;
inline constexpr std::size_t companion_size = [] {
  const std::size_t chunk = class_chunk_bytes(companion_power, size_class_options{}.chunk_size);
  const std::uint32_t blocks = blocks_per_chunk(chunk, companion_power) + 1;
  const std::size_t space =
      chunk - chunk_header_space - bitmap_words(blocks) * sizeof(std::uint64_t);
  return space / blocks / 16 * 16;
}();
inline constexpr unsigned companion_index = spaced_index_of(companion_power);

inline constexpr unsigned count = spaced_count + 1;
inline constexpr unsigned none = 255;  // "not pooled": the request goes to upstream
static_assert(count < none);

constexpr unsigned nominal_index_of(std::size_t bytes) noexcept {
  const unsigned spaced = spaced_index_of(bytes);
  return spaced < companion_index ? spaced : spaced + 1;
}

constexpr std::size_t nominal_size_of(unsigned index) noexcept {
  if (index < companion_index) return spaced_size_of(index);
  return index == companion_index ? companion_size : spaced_size_of(index - 1);
}

// Classes above this are not widened: their chunks hold 16 blocks or fewer, so a widened
// class would reach into the next one.
inline constexpr std::size_t largest_widened = 4096;

// A nominal size widened to the largest multiple of 16 that fits as many blocks in the class's
// chunk at the default chunk_size (size_class_chunk.hpp).
constexpr std::size_t widened(std::size_t nominal) noexcept {
  if (std::has_single_bit(nominal) || nominal > largest_widened) return nominal;
  const std::size_t chunk = class_chunk_bytes(nominal, size_class_options{}.chunk_size);
  const std::uint32_t blocks = blocks_per_chunk(chunk, nominal);
  const std::size_t space =
      chunk - chunk_header_space - bitmap_words(blocks) * sizeof(std::uint64_t);
  return space / blocks / 16 * 16;
}

inline constexpr auto class_sizes = [] {
  std::array<std::size_t, count> sizes{};
  for (unsigned index = 0; index < count; ++index) sizes[index] = widened(nominal_size_of(index));
  return sizes;
}();

constexpr std::size_t size_of(unsigned index) noexcept { return class_sizes[index]; }

// The class index of a request of `bytes`, 1 <= bytes <= largest: its nominal class, or the
// one below when widening made that one large enough (never more than one: each widened
// class stays below the next nominal size, which table_is_consistent checks). Requests of
// 3841..4080 bytes are 4096's by the spacing and go to the companion this way.
constexpr unsigned index_of(std::size_t bytes) noexcept {
  const unsigned nominal = nominal_index_of(bytes);
  return nominal > 0 && class_sizes[nominal - 1] >= bytes ? nominal - 1 : nominal;
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
    if (size < nominal_size_of(i)) return false;
    if (i + 1 < count && size >= nominal_size_of(i + 1)) return false;
  }
  for (std::size_t p = smallest; p <= largest; p *= 2)
    if (size_of(index_of(p)) != p) return false;
  return true;
}
static_assert(table_is_consistent());

}  // namespace pmrkit::detail::size_classes
