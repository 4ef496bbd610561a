// Internal: a chunk of size_class_resource, and the intrusive lists that hold chunks.
//
// A chunk is one upstream allocation of chunk_bytes (a power of two), aligned to chunk_bytes,
// holding blocks of one class at multiples of the block size from its start, so blocks are
// naturally aligned, and a 32-byte header with the chunk's bitmap just below it: its metadata,
// one cache line for every class from 16 bytes up. The alignment lets a block find its chunk
// with a mask.
//
// Where the metadata lies varies from chunk to chunk ("colour", chunk_layout below). Were it at
// the same offset in every chunk (as it was: the last 32 bytes), every header would fall in the
// same set of the processor's caches, since the chunks are aligned to 4 KiB or more: a set holds
// 12-16 lines, a destroyed container's frees touch hundreds of chunks, and nearly every block
// that came back missed on its header (issue 12: 13-21 ns against 5 a free in a model of the
// free path, docs/size_class_containers.md, "Headers in one cache set"). So a chunk's header
// sits at a line chosen by a hash of the chunk's address. A class of 64 blocks a chunk or more
// lets it land anywhere, on the blocks it covers (two at most, 1.6% of the chunk); a class of
// fewer and larger blocks keeps it in the space its blocks leave at the chunk's end, which for a
// power of two is its last block (of that block only the metadata's page is touched, so from 8 KiB
// blocks up most of it is address space, but a 4 KiB class loses the whole block's page).
//
// Which blocks of a chunk are free (in the shared store, not out in a cache or with a caller)
// is the bitmap, one bit per block, not a list threaded through the blocks. So a block coming
// back touches only the metadata line, and a refill hands blocks out in address order, lowest
// first, whatever order they were freed in: a container built after another was destroyed
// lands in address order again, as it would in fresh memory, and reads it back sequentially
// (issue 12's pooled maps read 1.2x slower while refills handed out chunks' free lists in free
// order). Untouched pages of a fresh chunk stay untouched until every lower block is out,
// except the metadata's.
#pragma once

#include <algorithm>
#include <bit>
#include <cstddef>
#include <cstdint>
#include <new>

namespace pmrkit::detail {

// Chunk sizes allowed: the chunk_size option's range (larger classes get larger chunks, within it).
inline constexpr std::size_t smallest_chunk_bytes = 4096;
inline constexpr std::size_t largest_chunk_bytes = std::size_t{256} << 20;

// Whole chunks: a request of a power of two in this range, aligned to its size, is what a pool
// over a size_class asks it for its own chunks (a request arena's), and takes a whole chunk
// (size_class_engine.hpp, is_whole_chunk). 4 KiB pages keep their class; above 512 KiB, the
// largest chunk a class takes at the default chunk_size, requests go to upstream as before.
inline constexpr std::size_t smallest_whole_chunk = 2 * smallest_chunk_bytes;
inline constexpr std::size_t largest_whole_chunk = std::size_t{512} << 10;
inline constexpr unsigned whole_chunk_sizes = 7;  // 8 KiB, 16 KiB, ..., 512 KiB
static_assert(smallest_whole_chunk << (whole_chunk_sizes - 1) == largest_whole_chunk);

enum class chunk_state : std::uint8_t { partial, full, empty };

struct chunk_header {
  chunk_header* prev = nullptr;
  chunk_header* next = nullptr;
  std::uint32_t bytes = 0;  // of the whole chunk, for whoever frees it (fits: see below)
  std::uint32_t capacity = 0;
  chunk_state state = chunk_state::partial;
  std::uint8_t shard = 0;  // which shard's partial list holds it (size_class_store.hpp)
  // The count of free blocks (those whose bit is set) at which a block coming back moves the
  // chunk in its store, and how many blocks must come back before it does: the free count is
  // their difference. A returning block only counts down (the store's count_back), one
  // decrement and a test, so that a destroy's frees, most of which move nothing, pay as little
  // as they can. 16 bits: a chunk holds at most 512 blocks (size_class_engine.cpp checks the
  // layouts).
  std::uint16_t next_move = 0;
  std::uint16_t until_move = 0;

  std::uint32_t free_count() const noexcept { return next_move - until_move; }
};

// The header and the bitmap below it (a bitmap of up to 256 blocks, every class from 16 bytes
// up, shares the header's cache line: a block that comes back costs one metadata line).
inline constexpr std::size_t chunk_header_space = 32;
static_assert(sizeof(chunk_header) <= chunk_header_space);
static_assert(smallest_chunk_bytes % 64 == 0);

constexpr std::size_t bitmap_words(std::uint32_t capacity) noexcept { return (capacity + 63) / 64; }

// Every header lies inside its chunk, so the chunk's start is the header's address masked.
inline std::byte* base_of_chunk(chunk_header* header, std::size_t chunk_bytes) noexcept {
  return reinterpret_cast<std::byte*>(reinterpret_cast<std::uintptr_t>(header) &
                                      ~(chunk_bytes - 1));
}
inline std::byte* base_of_chunk(chunk_header* header) noexcept {
  return base_of_chunk(header, header->bytes);
}
// The free-block bitmap: bit i of word i / 64 is block i, set while the block is free. The
// class's word count, when the caller has it, finds the bitmap without waiting for the header's
// line to arrive.
inline std::uint64_t* free_bits(chunk_header* header, std::uint32_t words) noexcept {
  return reinterpret_cast<std::uint64_t*>(header) - words;
}

// Blocks of block_size that fit in a chunk beside the header and their bitmap.
constexpr std::uint32_t blocks_per_chunk(std::size_t chunk_bytes, std::size_t block_size) noexcept {
  const std::size_t space = chunk_bytes - chunk_header_space;
  auto blocks = static_cast<std::uint32_t>(space / block_size);
  while (blocks * block_size + bitmap_words(blocks) * sizeof(std::uint64_t) > space) --blocks;
  return blocks;
}

// A class's chunk loses at most an eighth of itself to the header and the space its blocks do
// not fill: what a power-of-two class loses anyway, its last block giving way to the header.
constexpr bool fills_seven_eighths(std::size_t chunk_bytes, std::size_t block_size) noexcept {
  return std::size_t{blocks_per_chunk(chunk_bytes, block_size)} * block_size * 8 >=
         chunk_bytes * 7;
}
// A small class's chunk holds about this many blocks, up to chunk_size: a class gets chunks in
// proportion to its blocks, so the partly used chunk each class in use keeps costs little.
inline constexpr std::size_t small_class_blocks = 128;
// Chunks of eight blocks (seven for a power of two) always fill seven eighths; a class too large
// for chunk_size gets the smallest chunk that does, and never a larger one than eight blocks'.
inline constexpr std::size_t most_blocks_for_large_class = 8;

// The chunk bytes of a class of `block_size` under the chunk_size option. A class larger than
// an eighth of chunk_size takes the smallest power of two from chunk_size up that its blocks
// fill to seven eighths: 61,440-byte blocks one to a 64 KiB chunk, 40,960-byte blocks three
// to 128 KiB. A class used for one block at a time (a container's growing array, a hash
// table's buckets) then holds one chunk of about its size, not eight blocks' worth, and a class
// in heavy use loses no more than a power-of-two class does (docs/size_class.md, "Which chunk
// a class gets").
constexpr std::size_t class_chunk_bytes(std::size_t block_size, std::size_t chunk_size) noexcept {
  const std::size_t for_small_class = std::bit_ceil(small_class_blocks * block_size);
  const std::size_t within_option =
      for_small_class < smallest_chunk_bytes ? smallest_chunk_bytes
      : for_small_class > chunk_size         ? chunk_size
                                             : for_small_class;
  const std::size_t most = std::bit_ceil(most_blocks_for_large_class * block_size);
  if (most <= within_option) return within_option;
  for (std::size_t chunk = within_option; chunk < most; chunk *= 2)
    if (fills_seven_eighths(chunk, block_size)) return chunk;
  return most;
}

// Where a class's chunks keep their metadata. The header of a chunk at `base` lies at
// first_header + 64 * colour(base) from it, colour(base) a hash of the chunk's number in
// 0..colour_mask, and the bitmap's bitmap_words words just below it; first_header is 32 past a
// line's start, so the header and up to four bitmap words share one line.
struct chunk_layout {
  std::uint32_t slots = 0;         // block places, i * block_size from the chunk's start
  std::uint32_t bitmap_words = 0;  // one bit per place
  std::uint32_t first_header = 0;  // the lowest offset the header may take
  std::uint32_t colour_mask = 0;   // places for the header: a power of two, less one
  std::uint32_t capacity = 0;      // blocks every chunk of the class holds at least
};

// A class with at least this many blocks a chunk lets its metadata land on any line, giving up
// the blocks under it (two at most, 1.6% of the chunk). A class of fewer, larger blocks
// would lose too much of each chunk that way (a 3,440-byte class, 5%), so its metadata moves
// only within the space after its last block: a power of two's last block, or nothing.
inline constexpr std::size_t colour_anywhere_blocks = 64;

// The block places that the metadata of a header at `offset` covers.
constexpr std::uint32_t blocks_under_metadata(const chunk_layout& layout, std::size_t block_size,
                                              std::size_t offset) noexcept {
  const std::size_t low = offset - layout.bitmap_words * sizeof(std::uint64_t);
  const std::size_t high = offset + chunk_header_space;
  const std::size_t first = low / block_size;
  if (first >= layout.slots) return 0;
  const std::size_t last = std::min<std::size_t>((high - 1) / block_size, layout.slots - 1);
  return static_cast<std::uint32_t>(last - first + 1);
}

constexpr chunk_layout layout_of(std::size_t chunk_bytes, std::size_t block_size) noexcept {
  chunk_layout layout;
  const std::size_t places = chunk_bytes / block_size;
  // Many small blocks: the metadata anywhere. Few large ones: only after the last block.
  const bool anywhere = places >= colour_anywhere_blocks;
  layout.slots = anywhere ? static_cast<std::uint32_t>(places)
                          : blocks_per_chunk(chunk_bytes, block_size);
  layout.bitmap_words = static_cast<std::uint32_t>(bitmap_words(layout.slots));
  const std::size_t lowest = (anywhere ? 0 : std::size_t{layout.slots} * block_size) +
                             layout.bitmap_words * sizeof(std::uint64_t);
  const std::size_t first = lowest <= 32 ? 32 : (lowest - 32 + 63) / 64 * 64 + 32;
  layout.first_header = static_cast<std::uint32_t>(first);
  const std::size_t lines = (chunk_bytes - chunk_header_space - first) / 64 + 1;
  layout.colour_mask = static_cast<std::uint32_t>(std::bit_floor(lines) - 1);
  // After the last block the metadata covers none. Anywhere, the blocks it covers repeat every
  // block_size / gcd(block_size, 64) lines; past 1,024 (blocks of 16 KiB and more) the bound
  // that a region shorter than a block covers at most two stands in for the exact count.
  std::size_t period = block_size;
  while (period % 2 == 0 && block_size / period < 64) period /= 2;
  const bool exact = !anywhere || period <= 1024;
  std::uint32_t most_covered = exact ? 0 : 2;
  for (std::size_t line = 0; anywhere && exact && line <= layout.colour_mask && line < period;
       ++line)
    most_covered =
        std::max(most_covered, blocks_under_metadata(layout, block_size, first + 64 * line));
  layout.capacity = layout.slots - most_covered;
  return layout;
}

// The header of the chunk at `base` (aligned to its size), at a line picked by a
// multiplicative hash of the chunk's number, so chunks side by side, or every second one as an
// aligned allocator often places them, take lines far apart. The address is multiplied as it
// is: its low log2(chunk bytes) bits are zero, so the bits taken are those of the number's
// product that many places lower, as evenly spread, and the store's give is spared a shift by
// a count in a register (two instructions for every block it takes back).
inline chunk_header* header_in_chunk(std::uintptr_t base, const chunk_layout& layout) noexcept {
  const std::uint64_t hash = (static_cast<std::uint64_t>(base) * 0x9E3779B97F4A7C15u) >> 40;
  return reinterpret_cast<chunk_header*>(base + layout.first_header +
                                         ((hash & layout.colour_mask) << 6));
}

// Makes the chunk at `base` a fresh chunk of a class (a new chunk, or an empty one that changes
// class, whose old header may lie elsewhere): its header placed, every block free but those
// under the metadata.
inline chunk_header* format_chunk(std::byte* base, std::size_t chunk_bytes,
                                  const chunk_layout& layout, std::size_t block_size) noexcept {
  auto* const header =
      new (header_in_chunk(reinterpret_cast<std::uintptr_t>(base), layout)) chunk_header{};
  const auto offset = static_cast<std::size_t>(reinterpret_cast<std::byte*>(header) - base);
  header->bytes = static_cast<std::uint32_t>(chunk_bytes);
  std::uint64_t* const bits = free_bits(header, layout.bitmap_words);
  for (std::size_t w = 0; w < layout.bitmap_words; ++w) bits[w] = ~std::uint64_t{0};
  if (const std::uint32_t tail = layout.slots % 64)
    bits[layout.bitmap_words - 1] = (std::uint64_t{1} << tail) - 1;
  const std::uint32_t covered = blocks_under_metadata(layout, block_size, offset);
  if (covered != 0) {
    const std::size_t first = (offset - layout.bitmap_words * sizeof(std::uint64_t)) / block_size;
    for (std::size_t i = first; i < first + covered; ++i)
      bits[i / 64] &= ~(std::uint64_t{1} << (i % 64));
  }
  header->capacity = layout.slots - covered;
  // Every block free; the store that takes the chunk sets where its next move is.
  header->next_move = static_cast<std::uint16_t>(header->capacity);
  header->until_move = 0;
  return header;
}

// Makes the chunk at `base`, which was out whole, an empty chunk to keep: a header at its start
// that records its size and links it into a list. A class that takes it formats it again
// (format_chunk).
inline chunk_header* empty_chunk_at(void* base, std::size_t chunk_bytes) noexcept {
  auto* const header = new (base) chunk_header{};
  header->bytes = static_cast<std::uint32_t>(chunk_bytes);
  header->state = chunk_state::empty;
  return header;
}

// Block index from a block's offset in its chunk without a division: offsets are exact
// multiples of the block size and below 2^32, so multiplying by ceil(2^32 / size) and keeping
// the high half is exact (the error, index * (reciprocal * size - 2^32), stays below 2^32).
constexpr std::uint64_t block_reciprocal(std::size_t block_size) noexcept {
  return ((std::uint64_t{1} << 32) + block_size - 1) / block_size;
}
constexpr std::uint32_t block_index(std::size_t offset, std::uint64_t reciprocal) noexcept {
  return static_cast<std::uint32_t>((offset * reciprocal) >> 32);
}
static_assert(largest_chunk_bytes < (std::size_t{1} << 32));

class chunk_list {
 public:
  chunk_header* front() const noexcept { return head_; }
  chunk_header* back() const noexcept { return tail_; }

  void push_front(chunk_header* chunk) noexcept {
    chunk->prev = nullptr;
    chunk->next = head_;
    if (head_)
      head_->prev = chunk;
    else
      tail_ = chunk;
    head_ = chunk;
  }

  void push_back(chunk_header* chunk) noexcept {
    chunk->next = nullptr;
    chunk->prev = tail_;
    if (tail_)
      tail_->next = chunk;
    else
      head_ = chunk;
    tail_ = chunk;
  }

  void remove(chunk_header* chunk) noexcept {
    if (chunk->prev)
      chunk->prev->next = chunk->next;
    else
      head_ = chunk->next;
    if (chunk->next)
      chunk->next->prev = chunk->prev;
    else
      tail_ = chunk->prev;
    chunk->prev = chunk->next = nullptr;
  }

  // Detaches every chunk; returns the first (linked through next).
  chunk_header* take_all() noexcept {
    chunk_header* all = head_;
    head_ = tail_ = nullptr;
    return all;
  }

 private:
  chunk_header* head_ = nullptr;
  chunk_header* tail_ = nullptr;
};

}  // namespace pmrkit::detail
