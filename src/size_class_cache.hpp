// Internal: the cache layer of size_class, which a thread (or, unsync, the resource) keeps in
// front of the shared store: one stack of free blocks per class, a LIFO bounded by a limit that
// adapts to how the thread uses the class (as tcmalloc's free-list lengths do). Allocate and
// free touch only one stack in the common case.
//
// A stack is an array of block addresses, not a list threaded through the blocks (tcmalloc's
// per-CPU caches and Bonwick's magazines do the same). So a free never writes into the block
// it caches and an allocation never reads the block it hands out: a block freed in a scattered
// order (a node container destroyed in hash order) costs no cache miss on its own line, and
// when a cache gives blocks back to the store their addresses are read from consecutive slots,
// so the chunk headers they need are independent loads that the processor overlaps, where a
// list made each wait for the block before it (docs/size_class.md, "In real containers").
#pragma once

#include <algorithm>
#include <array>
#include <bit>
#include <cstddef>
#include <cstdint>
#include <cstring>

#include "size_class_policy.hpp"
#include "size_class_table.hpp"

namespace pmrkit::detail {

// One class's stack: where its slots begin, the next free slot, where its limit ends, and its
// allocations. 32 bytes, so two share a cache line. The count and the limit are distances
// between those addresses, so a free compares the next slot with the end, stores the block
// there and moves on: three instructions fewer than a count masked out of a word and scaled
// into an address, which took 3% off the pooled UnorderedMap and Document destroys
// (docs/size_class_containers.md, "Stacks as addresses").
// Below its first slot a stack keeps a null word, its floor (a stack without slots points
// at empty_stack_floor), so a pop finds the stack empty by the block it reads, without
// loading `first`: one load fewer on every allocation (docs/size_class_containers.md, "Loads
// on the fast paths").
// Invariant: count() <= limit() and limit() + 1 <= the capacity's slots above the floor (the
// cache's capacities count the floor too), or no slots and count() == limit() == 0, so a
// free within the limit always has a slot and a refill has room for the limit plus the block
// it hands out.
inline constexpr void* empty_stack_floor = nullptr;

template <template <class> class Counter>
struct block_stack {
  block_stack() noexcept { forget_slots(); }

  // Addresses held as integers, so that stats() can read them from another thread (the
  // Counter of a sync cache is a relaxed atomic: plain moves). The slots come from the
  // resource's upstream (the engine's reserve_slots and drop_slots), so they count where the
  // chunks do; they move only inside a write of the cache's slots_moves (a sequence lock),
  // which is how stats() knows that `first` and `next` belong together.
  Counter<std::uintptr_t> first;  // slots[0], just above the floor
  Counter<std::uintptr_t> next;   // the slot the next free fills: first + count() slots
  // first + limit(): a free that finds `next` here overflows (owner only). The limit, the
  // most blocks the stack holds, starts at 0 and grows on each refill, doubling up to a batch
  // and then a batch at a time, within the cache's byte budget (see size_class_cache); other
  // classes' refills halve it when the budget runs out.
  void** end = nullptr;
  Counter<std::uint64_t> allocations;  // frees are derived: blocks out of the store - live

  // Takes the block on top into `block`; false, taking nothing, if the stack is empty (the
  // block read is the floor's null).
  bool try_pop(void*& block) noexcept {
    const std::uintptr_t top = next.get();
    block = reinterpret_cast<void* const*>(top)[-1];
    if (block == nullptr) return false;
    next.set(top - sizeof(void*));
    allocations.add(1);
    return true;
  }

  // Puts the block on top; false, taking nothing, when the stack is at its limit (the caller
  // gives some back: the engine's overflow, which also takes the block).
  bool try_push(void* block) noexcept {
    const std::uintptr_t top = next.get();
    if (top >= reinterpret_cast<std::uintptr_t>(end)) [[unlikely]]
      return false;
    *reinterpret_cast<void**>(top) = block;
    next.set(top + sizeof(void*));
    return true;
  }

  void** slots() const noexcept { return reinterpret_cast<void**>(first.get()); }
  std::uint32_t count() const noexcept {
    return static_cast<std::uint32_t>((next.get() - first.get()) / sizeof(void*));
  }
  std::uint32_t limit() const noexcept { return static_cast<std::uint32_t>(end - slots()); }
  void set_count(std::uint32_t held) noexcept { next.set(first.get() + held * sizeof(void*)); }
  void set_limit(std::uint32_t most) noexcept { end = slots() + most; }

  static constexpr std::uint32_t min_words = 16;

  // The words (the floor and the slots) a stack of `capacity` words needs for `new_limit`
  // blocks and the one a refill hands out: the next power of two (at least 16) within `most`,
  // or `capacity` if it has room already. Starting at 16 words (128 bytes) spares a limit that
  // doubles from 1 four of its reallocations.
  static std::uint32_t capacity_for(std::uint32_t capacity, std::uint32_t new_limit,
                                    std::uint32_t most) noexcept {
    const std::uint32_t needed = new_limit + 2;
    if (needed <= capacity) return capacity;
    return std::min(std::max(std::bit_ceil(needed), min_words), std::max(most, needed));
  }

  // Moves the blocks held into `larger` (words for the floor, the limit and one more) and
  // returns the old words, for the caller to free. Inside a write of the cache's slots_moves.
  void** replace_slots(void** larger) noexcept {
    const std::uint32_t held = count();
    const std::uint32_t most = limit();
    void** const old = slots() - 1;
    larger[0] = nullptr;
    void** const above = larger + 1;
    if (held > 0) std::memcpy(above, old + 1, held * sizeof(void*));
    first.set(reinterpret_cast<std::uintptr_t>(above));
    next.set(reinterpret_cast<std::uintptr_t>(above + held));
    end = above + most;
    return old;
  }
  // Forgets the slots (their count and limit must be 0) and returns their words, for the
  // caller to free (none if the stack had no slots). Inside a write of the cache's
  // slots_moves.
  void** take_slots() noexcept {
    void** const old = slots() - 1;
    forget_slots();
    return old;
  }

 private:
  // No slots: first, next and end just above empty_stack_floor, so a pop reads null and a
  // free finds the stack at its limit.
  void forget_slots() noexcept {
    const auto above_floor = reinterpret_cast<std::uintptr_t>(&empty_stack_floor + 1);
    first.set(above_floor);
    next.set(above_floor);
    end = reinterpret_cast<void**>(above_floor);
  }
};
static_assert(sizeof(block_stack<plain_counter>) == 32);
static_assert(sizeof(block_stack<single_writer_counter>) == 32);

// A stack for each class, and one for each size of whole chunk (size_class_chunk.hpp), after
// every class's stack, whatever max_pooled is.
inline constexpr unsigned cache_stack_count = size_classes::count + whole_chunk_sizes;

// The stacks of every class, for one thread and one resource (unsync: for the resource).
// Invariant: limit_bytes = sum of limit * block size over the classes <= budget, so the
// blocks a cache holds never exceed the budget without the fast path having to count bytes.
template <template <class> class Counter, class SequenceLock>
struct size_class_cache {
  size_class_cache() = default;
  explicit size_class_cache(std::size_t budget_bytes, std::uint8_t shard_index = 0,
                            const void* thread_key = nullptr,
                            std::uint8_t idle_sweeps_to_take = 1) noexcept
      : budget(budget_bytes), shard(shard_index), thread(thread_key),
        sweeps_to_take(idle_sweeps_to_take) {}

  std::size_t limit_bytes = 0;
  std::size_t budget = 0;          // the thread_cache option
  unsigned steal_cursor = 0;       // where the next search for limit to take back starts
  // Slow paths this cache's thread has taken. With the stacks' allocation counts, what a sweep
  // for idle caches compares: a thread whose cache shows neither between two sweeps is idle
  // (size_class_engine's reclaim_idle_caches).
  Counter<std::uint64_t> slow_paths;
  std::uint64_t activity_at_last_sweep = ~std::uint64_t{0};  // written by sweeps, in turn
  bool sweep_due = false;  // this thread claimed the next sweep: done once this use ends
  std::uint8_t shard = 0;  // the class stores' shard its refills take from first
  // Whose cache it is (the thread's cache directory, compared only), how many sweeps in a row
  // must find it idle before one takes it back, and how many have (size_class_idle_grace.hpp).
  const void* thread = nullptr;
  std::uint8_t sweeps_to_take = 1;
  std::uint8_t idle_sweeps = 0;  // written by sweeps, in turn
  // Aligned so that each 32-byte stack lies within one cache line.
  alignas(64) std::array<block_stack<Counter>, cache_stack_count> stacks{};
  // The cache's allocations, and each stack's (their low 32 bits), at the last scavenge: a class
  // whose count has not moved since, and whose stack took no slow path, was not used while the
  // thread made that many allocations (size_class_engine's scavenge).
  std::uint64_t allocations_at_scavenge = 0;
  std::array<std::uint32_t, cache_stack_count> class_allocations_at_scavenge{};
  // Each stack's words from upstream (its floor and slots; 0: none), and its refills and
  // overflows since the last scavenge: with its allocation count, whether the thread used the
  // class in between. Kept out of the stacks, which the fast paths touch, so a stack stays 32
  // bytes.
  std::array<std::uint32_t, cache_stack_count> capacities{};
  std::array<std::uint32_t, cache_stack_count> stack_slow_paths{};
  // Held while a stack's slots move (the engine's reserve_slots and drop_slots): a stats()
  // that overlapped a move reads the stacks again. The fast paths, which never move slots, do
  // not touch it.
  SequenceLock slots_moves;
};

}  // namespace pmrkit::detail
