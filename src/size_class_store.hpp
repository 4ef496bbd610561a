// Internal: the shared store of one size class — the chunks of that class and their free
// blocks. Caches refill from it and overflow into it in batches; a block that comes back sets
// its bit in its own chunk's bitmap (the header found by a mask and a hash,
// size_class_chunk.hpp), so each chunk knows how many of its blocks are out, and a chunk with
// none out leaves the class (size_class_empty_chunks.hpp).
// Every member function runs under `mutex` (the engine takes it; unsync: a no-op).
#pragma once

#include <algorithm>
#include <array>
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
  static constexpr unsigned shards = policy_traits<Policy>::store_shards;

  mutable typename policy_traits<Policy>::mutex mutex;
  // Some blocks out, some free, in one list per shard. A thread's cache refills from its own
  // shard's chunks (classes up to 256 bytes: size_class_engine.cpp, largest_sharded_block), so
  // two threads' blocks do not interleave within a chunk (mimalloc's pages belong to a thread
  // for the same reason): when they did, the threads of a pooled container op took 1.5-2.9x
  // mimalloc's time, each core's caches half full of the other's lines
  // (docs/size_class_containers.md, "On every core"). Refills take from the front; a chunk that
  // gets a block back while full goes to the front, one that thins out to a quarter of its
  // blocks goes to the back. So refills keep dense chunks dense and leave sparse ones to drain:
  // a live set that shrinks or whose mix of sizes drifts empties whole chunks, which can then
  // serve any class.
  std::array<chunk_list, shards> partial;
  chunk_list full;     // every block out
  std::uint64_t chunks = 0;
  std::uint64_t chunk_blocks = 0;   // blocks the chunks hold, free or out
  std::uint64_t blocks_out = 0;     // allocated or cached, over all chunks
  std::uint64_t allocations = 0;    // for caches that are gone and for uncached calls

  void add_chunk(chunk_header* chunk, unsigned shard) noexcept {
    chunk->state = chunk_state::partial;
    chunk->shard = static_cast<std::uint8_t>(shard);
    set_free_count(chunk, chunk->capacity);
    partial[shard].push_front(chunk);
    ++chunks;
    chunk_blocks += chunk->capacity;
  }

  // Moves at least `wanted` blocks (fewer if the class's chunks run out) and at most `most`
  // into out[0..), lowest address first, chunk after chunk, and returns how many. A chunk gives
  // all its free blocks when they fit under `most`, so a cache holds blocks of few chunks. The
  // blocks are read from each chunk's bitmap: none of them is touched. Only `shard`'s chunks.
  std::uint32_t take(const class_info& info, unsigned shard, std::uint32_t wanted,
                     std::uint32_t most, void** out) noexcept {
    wanted = std::min(wanted, most);
    std::uint32_t taken = 0;
    while (taken < wanted) {
      chunk_header* const chunk = partial[shard].front();
      if (!chunk) break;
      const std::uint32_t free = chunk->free_count();
      const std::uint32_t n = taken + free <= most ? free : std::min(free, wanted - taken);
      take_lowest(chunk, info, n, out + taken);
      taken += n;
      if (n == free) {
        partial[shard].remove(chunk);
        chunk->state = chunk_state::full;
        full.push_front(chunk);
      }
      set_free_count(chunk, free - n);
    }
    blocks_out += taken;
    return taken;
  }

  // Moves the sparsest chunk with free blocks of another shard that no thread's cache uses
  // any more (orphaned(shard)) into `shard`, for a refill that found none of its own and no
  // kept empty chunk, rather than take a new one from upstream: what threads that exited or
  // went idle left half used is used again. False if there is none.
  template <class Orphaned>
  bool adopt_chunk(unsigned shard, Orphaned&& orphaned) noexcept {
    for (unsigned step = 1; step < shards; ++step) {
      const unsigned other_shard = (shard + step) % shards;
      chunk_list& other = partial[other_shard];
      chunk_header* const chunk = other.back();
      if (!chunk || !orphaned(other_shard)) continue;
      other.remove(chunk);
      chunk->shard = static_cast<std::uint8_t>(shard);
      partial[shard].push_front(chunk);
      return true;
    }
    return false;
  }

  // Takes back blocks[0..count). A chunk whose last block comes back leaves the class, fresh
  // again, chained onto `emptied` (through next) for the caller to keep or return to upstream
  // after unlocking. The addresses come from an array, so each block's header load is known
  // in advance and several are in flight at once.
  void give(const class_info& info, void* const* blocks, std::uint32_t count,
            chunk_header*& emptied) noexcept {
    if (mostly_runs(info.chunk_shift, blocks, count))
      give_in_runs(info, blocks, count, emptied);
    else
      give_one_by_one(info, blocks, count, emptied);
    blocks_out -= count;
  }

  // Unlinks every chunk, chained through next, for the caller to free; resets the counters.
  chunk_header* take_every_chunk() noexcept {
    chunk_header* all = nullptr;
    std::array<chunk_list*, shards + 1> lists;
    for (unsigned shard = 0; shard < shards; ++shard) lists[shard] = &partial[shard];
    lists[shards] = &full;
    for (chunk_list* list : lists) {
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
  // Whether the blocks come mostly in runs, consecutive blocks of one chunk: a container
  // destroyed in the order it was built frees chunk after chunk, one in hash order or a tree's
  // in key order frees all over the class. The two take different loops: a run's bits and
  // count gather in registers and reach its chunk once, in 60% of the time blocks take alone,
  // but every run's end is a branch that a mix of short runs mispredicts
  // (docs/size_class_containers.md, "Runs of one chunk"). Runs of eight on average are where
  // gathering starts to win; sixteen pairs of neighbours, spread over the batch, tell (a pass
  // over all of them cost a fifth of what a block takes).
  static bool mostly_runs(unsigned chunk_shift, void* const* blocks, std::uint32_t count) noexcept {
    if (count < 2) return false;
    constexpr std::uint32_t most_pairs = 16;
    // A division by a constant: a shift.
    const std::uint32_t pairs = count - 1 < most_pairs ? count - 1 : most_pairs;
    const std::uint32_t step = count - 1 < most_pairs ? 1 : (count - 1) / most_pairs;
    std::uint32_t same = 0;
    for (std::uint32_t k = 0; k < pairs; ++k) {
      const auto here = reinterpret_cast<std::uintptr_t>(blocks[k * step]);
      const auto next = reinterpret_cast<std::uintptr_t>(blocks[k * step + 1]);
      same += (here >> chunk_shift) == (next >> chunk_shift);
    }
    return same * 8 >= pairs * 7;
  }

  // Each block straight to its chunk: its bit set, its chunk's count and place updated.
  void give_one_by_one(const class_info& info, void* const* blocks, std::uint32_t count,
                       chunk_header*& emptied) noexcept {
    // Copies: the bitmap words written below could alias `info`, which the compiler would
    // then load again for every block.
    const unsigned chunk_shift = info.chunk_shift;
    const chunk_layout layout = info.layout;
    const std::uint64_t reciprocal = info.block_reciprocal;
    const std::uintptr_t base_mask = ~((std::uintptr_t{1} << chunk_shift) - 1);
    for (std::uint32_t i = 0; i < count; ++i) {
      const auto address = reinterpret_cast<std::uintptr_t>(blocks[i]);
      const std::uintptr_t base = address & base_mask;
      chunk_header* const chunk = header_in_chunk(base, layout);
      const std::uint32_t index = block_index(address - base, reciprocal);
      const std::uint64_t bit = std::uint64_t{1} << (index % 64);
      std::uint64_t& word = free_bits(chunk, layout.bitmap_words)[index / 64];
      assert(address - base == index * info.block_size &&
             "pmrkit: size_class: not a block of this class");
      assert(!(word & bit) && "pmrkit: size_class: block freed twice");
      word |= bit;
      // One block: the countdown alone, in line (count_back's test, for a run of one).
      if (--chunk->until_move != 0) [[likely]]
        continue;
      move_back(chunk, chunk->next_move, 1, emptied);
    }
  }

  // Runs: the bits of a run's blocks gather a bitmap word at a time, and its chunk's count
  // and place are updated once, at the run's end.
  void give_in_runs(const class_info& info, void* const* blocks, std::uint32_t count,
                    chunk_header*& emptied) noexcept {
    // Copies, as in give_one_by_one.
    const unsigned chunk_shift = info.chunk_shift;
    const chunk_layout layout = info.layout;
    const std::uint64_t reciprocal = info.block_reciprocal;
    std::uint32_t i = 0;
    while (i < count) {
      const auto first = reinterpret_cast<std::uintptr_t>(blocks[i]);
      const std::uintptr_t number = first >> chunk_shift;
      const std::uintptr_t base = number << chunk_shift;
      chunk_header* const chunk = header_in_chunk(base, layout);
      std::uint64_t* const bitmap = free_bits(chunk, layout.bitmap_words);
      const std::uint32_t run_start = i;
      std::uint32_t index = block_index(first - base, reciprocal);
      std::uint32_t word = index / 64;
      std::uint64_t bits = 0;
      for (;;) {
        const std::uint64_t bit = std::uint64_t{1} << (index % 64);
        assert(blocks[i] == reinterpret_cast<std::byte*>(base) + index * info.block_size &&
               "pmrkit: size_class: not a block of this class");
        assert(!((bitmap[word] | bits) & bit) && "pmrkit: size_class: block freed twice");
        bits |= bit;
        if (++i == count) break;
        const auto address = reinterpret_cast<std::uintptr_t>(blocks[i]);
        if (address >> chunk_shift != number) break;
        index = block_index(address - base, reciprocal);
        if (index / 64 != word) {
          bitmap[word] |= bits;
          word = index / 64;
          bits = 0;
        }
      }
      bitmap[word] |= bits;
      count_back(chunk, i - run_start, emptied);
    }
  }

  // Counts `returned` blocks, whose bits are set already, back into `chunk`, and moves the chunk
  // as its new count asks (move_back). Most blocks that come back only count down to the next
  // move, instead of working out each move's condition for every block (scattered frees 2-11%
  // faster; docs/size_class_containers.md, "A block that only counts"); a block given back
  // alone takes one decrement and a test, in line in give_one_by_one (a destroy's frees pay
  // for every instruction here: docs/size_class_containers.md, "What a free costs in a
  // destroy").
  void count_back(chunk_header* chunk, std::uint32_t returned, chunk_header*& emptied) noexcept {
    if (returned < chunk->until_move) [[likely]] {
      chunk->until_move = static_cast<std::uint16_t>(chunk->until_move - returned);
      return;
    }
    move_back(chunk, chunk->free_count() + returned, returned, emptied);
  }

  // Sets the chunk's free count to `free` (its state already set): where its next move lies
  // and how many blocks must come back before it.
  static void set_free_count(chunk_header* chunk, std::uint32_t free) noexcept {
    chunk->next_move = next_move_of(*chunk, free);
    chunk->until_move = static_cast<std::uint16_t>(chunk->next_move - free);
  }

  // The free count from which count_back moves `chunk` (with `free` blocks free now): the first
  // block back into a full chunk, the count at which it thins out to a quarter of its blocks
  // out, or every block back.
  static std::uint16_t next_move_of(const chunk_header& chunk, std::uint32_t free) noexcept {
    if (chunk.state == chunk_state::full) return 1;
    const std::uint32_t quarter = chunk.capacity / 4;
    return static_cast<std::uint16_t>(chunk.capacity - free > quarter ? chunk.capacity - quarter
                                                                       : chunk.capacity);
  }

  // `returned` blocks just came back into `chunk`, which now has `free` free, reaching its
  // next_move: out of the class when none is out, from full to the front of partial, and to the
  // back of partial when it thins out to a quarter of its blocks (a chunk that does both at once
  // goes to the back).
  void move_back(chunk_header* chunk, std::uint32_t free, std::uint32_t returned,
                 chunk_header*& emptied) noexcept {
    const bool was_full = chunk->state == chunk_state::full;
    const std::uint32_t out = chunk->capacity - free;
    chunk_list& own = partial[chunk->shard];
    if (out == 0) {
      (was_full ? full : own).remove(chunk);
      --chunks;
      chunk_blocks -= chunk->capacity;
      chunk->state = chunk_state::empty;
      chunk->next = emptied;
      emptied = chunk;
      return;
    }
    // out <= a quarter < out + returned, in one comparison (a quarter below out wraps around).
    const auto thinned = [&] { return chunk->capacity / 4 - out < returned; };
    if (was_full) {
      full.remove(chunk);
      chunk->state = chunk_state::partial;
      if (thinned())
        own.push_back(chunk);
      else
        own.push_front(chunk);
    } else if (thinned()) {
      own.remove(chunk);
      own.push_back(chunk);
    }
    set_free_count(chunk, free);
  }

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
  }
};

}  // namespace pmrkit::detail
