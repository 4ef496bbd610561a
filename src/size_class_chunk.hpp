// Internal: a chunk of size_class_resource, and the intrusive lists that hold chunks.
//
// A chunk is one upstream allocation of chunk_bytes (a power of two), aligned to chunk_bytes,
// holding blocks of one class from its start and its header in its last 64 bytes. The
// alignment lets a block find its header with a mask; putting the header last keeps every
// block at a multiple of its size from an aligned address, so blocks are naturally aligned
// (a power-of-two class gives up its last block for this, but the pages of that block are
// never touched, so only address space is spent).
#pragma once

#include <cstddef>
#include <cstdint>
#include <cstring>

namespace pmrkit::detail {

// Free blocks are linked through their first word.
inline void* next_of(void* block) noexcept {
  void* next;
  std::memcpy(&next, block, sizeof next);
  return next;
}
inline void set_next(void* block, void* next) noexcept { std::memcpy(block, &next, sizeof next); }

// Chunk sizes allowed: the chunk_size option's range (larger classes get larger chunks, within it).
inline constexpr std::size_t smallest_chunk_bytes = 4096;
inline constexpr std::size_t largest_chunk_bytes = std::size_t{256} << 20;

enum class chunk_state : std::uint8_t { partial, full, empty };

struct chunk_header {
  chunk_header* prev = nullptr;
  chunk_header* next = nullptr;
  std::size_t bytes = 0;         // of the whole chunk, for whoever frees it
  void* free_list = nullptr;     // blocks given back to the shared store
  void* free_tail = nullptr;     // the last block of free_list: a refill splices the list whole
  std::uint32_t free_count = 0;  // blocks on free_list
  std::uint32_t carved = 0;      // blocks [0, carved) have been handed out at least once
  std::uint32_t capacity = 0;
  chunk_state state = chunk_state::partial;

  // Blocks out of the shared store: allocated, or in some thread's cache.
  std::uint32_t blocks_out() const noexcept { return carved - free_count; }
  bool exhausted() const noexcept { return free_list == nullptr && carved == capacity; }
};

inline constexpr std::size_t chunk_header_space = 64;
static_assert(sizeof(chunk_header) <= chunk_header_space);

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
constexpr std::uint32_t blocks_per_chunk(std::size_t chunk_bytes, std::size_t block_size) noexcept {
  return static_cast<std::uint32_t>((chunk_bytes - chunk_header_space) / block_size);
}

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
