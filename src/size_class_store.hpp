// Internal: the shared store of one size class — the chunks of that class and their free
// blocks. Caches refill from it and overflow into it in batches; a block that comes back sets
// its bit in its own chunk's bitmap (the header found by a mask and a hash,
// size_class_chunk.hpp), so each chunk knows how many of its blocks are out, and a chunk with
// none out leaves the class (size_class_empty_chunks.hpp).
// Every member function runs under `mutex` (the engine takes it; unsync: a no-op).
#pragma once

#include <algorithm>
#include <bit>
#include <cassert>
#include <cstddef>
#include <cstdint>

#include "size_class_chunk.hpp"
#include "size_class_policy.hpp"

namespace pmrkit::detail {

struct class_info {
  std::size_t block_size = 0;
  std::uint64_t block_reciprocal = 0;  // for block_index (size_class_chunk.hpp)
  std::size_t chunk_bytes = 0;
  unsigned chunk_shift = 0;     // log2 of chunk_bytes
  chunk_layout layout;          // where each chunk's header lies; blocks per chunk
  std::uint32_t batch = 0;      // blocks per refill at most, and the most a limit grows by at once
  std::uint32_t max_limit = 0;  // blocks of the class a cache may hold at most
};

template <class Policy>
struct alignas(64) class_store {
  mutable typename policy_traits<Policy>::mutex mutex;
  // Some blocks out, some free. Refills take from the front; a chunk that gets a block back
  // while full goes to the front, one that thins out to a quarter of its blocks goes to the
  // back. So refills keep dense chunks dense and leave sparse ones to drain: a live set that
  // shrinks or whose mix of sizes drifts empties whole chunks, which can then serve any class.
  chunk_list partial;
  chunk_list full;     // every block out
  std::uint64_t chunks = 0;
  std::uint64_t chunk_blocks = 0;   // blocks the chunks hold, free or out
  std::uint64_t blocks_out = 0;     // allocated or cached, over all chunks
  std::uint64_t allocations = 0;    // for caches that are gone and for uncached calls

  void add_chunk(chunk_header* chunk) noexcept {
    chunk->state = chunk_state::partial;
    partial.push_front(chunk);
    ++chunks;
    chunk_blocks += chunk->capacity;
  }

  // Moves at least `wanted` blocks (fewer if the class's chunks run out) and at most `most`
  // into out[0..), lowest address first, chunk after chunk, and returns how many. A chunk gives
  // all its free blocks when they fit under `most`, so a cache holds blocks of few chunks. The
  // blocks are read from each chunk's bitmap: none of them is touched.
  std::uint32_t take(const class_info& info, std::uint32_t wanted, std::uint32_t most,
                     void** out) noexcept {
    wanted = std::min(wanted, most);
    std::uint32_t taken = 0;
    while (taken < wanted) {
      chunk_header* const chunk = partial.front();
      if (!chunk) break;
      const std::uint32_t n = taken + chunk->free_count <= most
                                  ? chunk->free_count
                                  : std::min(chunk->free_count, wanted - taken);
      take_lowest(chunk, info, n, out + taken);
      taken += n;
      if (chunk->exhausted()) {
        partial.remove(chunk);
        chunk->state = chunk_state::full;
        full.push_front(chunk);
      }
    }
    blocks_out += taken;
    return taken;
  }

  // Takes back blocks[0..count). A chunk whose last block comes back leaves the class, fresh
  // again, chained onto `emptied` (through next) for the caller to keep or return to upstream
  // after unlocking. The addresses come from an array, so each block's header load is known
  // in advance and several are in flight at once.
  void give(const class_info& info, void* const* blocks, std::uint32_t count,
            chunk_header*& emptied) noexcept {
    // Copies: the bitmap words written below could alias `info`, which the compiler would
    // then load again for every block.
    const unsigned chunk_shift = info.chunk_shift;
    const chunk_layout layout = info.layout;
    const std::uint64_t reciprocal = info.block_reciprocal;
    const std::uintptr_t base_mask = ~((std::uintptr_t{1} << chunk_shift) - 1);
    for (std::uint32_t i = 0; i < count; ++i) {
      void* const block = blocks[i];
      const auto address = reinterpret_cast<std::uintptr_t>(block);
      const std::uintptr_t base = address & base_mask;
      chunk_header* const chunk = header_in_chunk(base, chunk_shift, layout);
      const std::uint32_t index = block_index(address - base, reciprocal);
      const std::uint64_t bit = std::uint64_t{1} << (index % 64);
      std::uint64_t& word = free_bits(chunk, layout.bitmap_words)[index / 64];
      assert(address - base == index * info.block_size &&
             "pmrkit: size_class: not a block of this class");
      assert(!(word & bit) && "pmrkit: size_class: block freed twice");
      word |= bit;
      const bool was_full = chunk->state == chunk_state::full;
      ++chunk->free_count;
      const std::uint32_t out = chunk->blocks_out();
      if (out == 0) {
        (was_full ? full : partial).remove(chunk);
        --chunks;
        chunk_blocks -= chunk->capacity;
        chunk->state = chunk_state::empty;
        chunk->next = emptied;
        emptied = chunk;
      } else if (was_full) {
        full.remove(chunk);
        chunk->state = chunk_state::partial;
        partial.push_front(chunk);
      } else if (out == chunk->capacity / 4) {
        partial.remove(chunk);
        partial.push_back(chunk);
      }
    }
    blocks_out -= count;
  }

  // Unlinks every chunk, chained through next, for the caller to free; resets the counters.
  chunk_header* take_every_chunk() noexcept {
    chunk_header* all = nullptr;
    for (chunk_list* list : {&partial, &full}) {
      chunk_header* chunk = list->take_all();
      while (chunk) {
        chunk_header* const next = chunk->next;
        chunk->next = all;
        all = chunk;
        chunk = next;
      }
    }
    chunks = chunk_blocks = blocks_out = allocations = 0;
    return all;
  }

 private:
  // Writes the addresses of the chunk's `n` lowest free blocks, in address order, to out[0..n).
  static void take_lowest(chunk_header* chunk, const class_info& info, std::uint32_t n,
                          void** out) noexcept {
    if (n == 0) return;
    std::byte* const base = base_of_chunk(chunk, info.chunk_bytes);
    std::uint64_t* const bits = free_bits(chunk, info.layout.bitmap_words);
    std::uint32_t taken = 0;
    for (std::size_t w = 0; taken < n; ++w) {
      std::uint64_t word = bits[w];
      while (word != 0 && taken < n) {
        out[taken++] =
            base + (w * 64 + static_cast<std::size_t>(std::countr_zero(word))) * info.block_size;
        word &= word - 1;
      }
      bits[w] = word;
    }
    chunk->free_count -= n;
  }
};

}  // namespace pmrkit::detail
