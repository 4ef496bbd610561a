// Internal: a chunk of size_class_resource, and the intrusive lists that hold chunks.
//
// A chunk is one upstream allocation of chunk_bytes (a power of two), aligned to chunk_bytes,
// holding blocks of one class from its start and its header in its last 32 bytes. The
// alignment lets a block find its header with a mask; putting the header last keeps every
// block at a multiple of its size from an aligned address, so blocks are naturally aligned
// (a power-of-two class gives up its last block for this; of that block only the page that
// holds the header and the bitmap is touched, so from 8 KiB blocks up most of it is address
// space, but a 4 KiB class loses the whole block's page, 1/16 of its chunk).
//
// Which blocks of a chunk are free (in the shared store, not out in a cache or with a caller)
// is a bitmap just below the header, one bit per block, not a list threaded through the
// blocks. So a block coming back touches only the header's lines, and a refill hands blocks
// out in address order, lowest first, whatever order they were freed in: a container built
// after another was destroyed lands in address order again, as it would in fresh memory, and
// reads it back sequentially (issue 12's pooled maps read 1.2x slower while refills handed
// out chunks' free lists in free order). Untouched pages of a fresh chunk stay untouched until
// every lower block is out.
#pragma once

#include <bit>
#include <cstddef>
#include <cstdint>

namespace pmrkit::detail {

// Chunk sizes allowed: the chunk_size option's range (larger classes get larger chunks, within it).
inline constexpr std::size_t smallest_chunk_bytes = 4096;
inline constexpr std::size_t largest_chunk_bytes = std::size_t{256} << 20;

enum class chunk_state : std::uint8_t { partial, full, empty };

struct chunk_header {
  chunk_header* prev = nullptr;
  chunk_header* next = nullptr;
  std::uint32_t bytes = 0;       // of the whole chunk, for whoever frees it (fits: see below)
  std::uint32_t free_count = 0;  // blocks whose bit is set
  std::uint32_t capacity = 0;
  chunk_state state = chunk_state::partial;

  // Blocks out of the shared store: allocated, or in some thread's cache.
  std::uint32_t blocks_out() const noexcept { return capacity - free_count; }
  bool exhausted() const noexcept { return free_count == 0; }
};

// The header takes the chunk's last 32 bytes and its bitmap lies just below, so a bitmap of up
// to 256 blocks (every class from 16 bytes up) shares the header's cache line: a block that
// comes back costs one metadata line, not two.
inline constexpr std::size_t chunk_header_space = 32;
static_assert(sizeof(chunk_header) <= chunk_header_space);
static_assert(smallest_chunk_bytes % 64 == 0);

constexpr std::size_t bitmap_words(std::uint32_t capacity) noexcept { return (capacity + 63) / 64; }

inline chunk_header* header_of_chunk(std::byte* base, std::size_t chunk_bytes) noexcept {
  return reinterpret_cast<chunk_header*>(base + chunk_bytes - chunk_header_space);
}
inline std::byte* base_of_chunk(chunk_header* header, std::size_t chunk_bytes) noexcept {
  return reinterpret_cast<std::byte*>(header) + chunk_header_space - chunk_bytes;
}
inline std::byte* base_of_chunk(chunk_header* header) noexcept {
  return base_of_chunk(header, header->bytes);
}
inline chunk_header* header_of_block(void* block, std::size_t chunk_bytes) noexcept {
  const auto address = reinterpret_cast<std::uintptr_t>(block);
  return header_of_chunk(reinterpret_cast<std::byte*>(address & ~(chunk_bytes - 1)), chunk_bytes);
}
// The free-block bitmap: bit i of word i / 64 is block i, set while the block is free. The
// class's capacity, when the caller has it, finds the bitmap without waiting for the header's
// line to arrive, so that both loads of a returning block are in flight at once.
inline std::uint64_t* free_bits(chunk_header* header, std::uint32_t capacity) noexcept {
  return reinterpret_cast<std::uint64_t*>(header) - bitmap_words(capacity);
}
inline std::uint64_t* free_bits(chunk_header* header) noexcept {
  return free_bits(header, header->capacity);
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

// Marks every block of a chunk free: a fresh chunk, or one that changes class.
inline void reset_free_bits(chunk_header* header) noexcept {
  std::uint64_t* const bits = free_bits(header);
  const std::size_t words = bitmap_words(header->capacity);
  for (std::size_t w = 0; w < words; ++w) bits[w] = ~std::uint64_t{0};
  if (const std::uint32_t tail = header->capacity % 64)
    bits[words - 1] = (std::uint64_t{1} << tail) - 1;
  header->free_count = header->capacity;
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
