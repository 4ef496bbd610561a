// Internal: a table of blocks a size_class engine holds from upstream, with their sizes and
// alignments. The engine keeps two: its large blocks (requests it passed straight to upstream),
// so release() can return them and deallocate() can tell a block it gave out from one it did
// not; and its chunks, entered as they come from upstream and removed as they go back, so
// release() returns every chunk whoever has it (a whole chunk out with a caller among them).
// An open-addressing hash table whose storage comes from the same upstream: fault injection on
// upstream reaches it, and the global heap is never used. Linear probing with backward-shift
// deletion; the table doubles at 3/4 full and never shrinks until release_storage() (which the
// engine calls for its large blocks' table once none is out, in trim()). Not thread-safe: the
// engine holds the table's mutex around every call.
#pragma once

#include <bit>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <memory_resource>

namespace pmrkit::detail {

class large_blocks {
 public:
  struct block {
    void* address = nullptr;  // nullptr: an empty slot
    std::size_t bytes = 0;
    std::size_t alignment = 0;
  };

  large_blocks() = default;
  large_blocks(const large_blocks&) = delete;
  large_blocks& operator=(const large_blocks&) = delete;
  ~large_blocks() = default;  // the owner calls release_storage(): we do not keep upstream

  // Records a block; may move to a larger table from upstream first, and throws (leaving
  // the table as it was) if upstream does. Returns how many more bytes the table now holds.
  std::size_t insert(const block& b, std::pmr::memory_resource* upstream) {
    std::size_t grown = 0;
    if ((count_ + 1) * 4 > capacity_ * 3) grown = grow(upstream);
    place(b);
    ++count_;
    return grown;
  }

  // Forgets the block at `address` and returns it; a block with a null address if there is
  // none (never given out, or forgotten already).
  block erase(void* address) noexcept {
    // Null marks an empty slot: looking it up would "find" one and take a block off the count.
    if (capacity_ == 0 || address == nullptr) return {};
    std::size_t slot = home(address);
    while (slots_[slot].address != address) {
      if (slots_[slot].address == nullptr) return {};
      slot = next(slot);
    }
    const block found = slots_[slot];
    // Backward shift: move later entries of the run into the hole when their home allows it.
    for (std::size_t hole = slot, at = next(slot);; at = next(at)) {
      if (slots_[at].address == nullptr) {
        slots_[hole] = {};
        break;
      }
      const std::size_t from_home = (at - home(slots_[at].address)) & (capacity_ - 1);
      const std::size_t from_hole = (at - hole) & (capacity_ - 1);
      if (from_home >= from_hole) {
        slots_[hole] = slots_[at];
        hole = at;
      }
    }
    --count_;
    return found;
  }

  template <class Visit>
  void for_each(Visit&& visit) const {
    for (std::size_t i = 0; i < capacity_; ++i)
      if (slots_[i].address != nullptr) visit(slots_[i]);
  }

  std::size_t size() const noexcept { return count_; }
  std::size_t storage_bytes() const noexcept { return capacity_ * sizeof(block); }

  // Gives the table back to upstream and forgets every block (their memory is the caller's).
  void release_storage(std::pmr::memory_resource* upstream) noexcept {
    if (slots_) upstream->deallocate(slots_, storage_bytes(), alignof(block));
    slots_ = nullptr;
    capacity_ = count_ = 0;
  }

 private:
  static constexpr std::size_t first_capacity = 16;

  std::size_t home(const void* address) const noexcept {
    // Fibonacci hashing; blocks are aligned, so the low bits say little.
    const auto key = reinterpret_cast<std::uintptr_t>(address) * 0x9E3779B97F4A7C15ull;
    return static_cast<std::size_t>(key >> (64 - std::countr_zero(capacity_)));
  }
  std::size_t next(std::size_t slot) const noexcept { return (slot + 1) & (capacity_ - 1); }

  void place(const block& b) noexcept {
    std::size_t slot = home(b.address);
    while (slots_[slot].address != nullptr) slot = next(slot);
    slots_[slot] = b;
  }

  std::size_t grow(std::pmr::memory_resource* upstream) {
    const std::size_t old_capacity = capacity_;
    block* const old = slots_;
    const std::size_t capacity = old_capacity == 0 ? first_capacity : old_capacity * 2;
    void* const storage = upstream->allocate(capacity * sizeof(block), alignof(block));
    slots_ =
        std::uninitialized_value_construct_n(static_cast<block*>(storage), capacity) - capacity;
    capacity_ = capacity;
    for (std::size_t i = 0; i < old_capacity; ++i)
      if (old[i].address != nullptr) place(old[i]);
    if (old) upstream->deallocate(old, old_capacity * sizeof(block), alignof(block));
    return (capacity - old_capacity) * sizeof(block);
  }

  block* slots_ = nullptr;
  std::size_t capacity_ = 0;  // zero or a power of two
  std::size_t count_ = 0;
};

}  // namespace pmrkit::detail
