// Internal: the empty chunks of size_class_resource, shared by every class.
//
// A chunk whose blocks have all come back leaves its class: it is fresh again (every block free),
// so any class whose chunks have the same size can take it. Without this, each class keeps its
// own high-water mark of chunks, and a live set whose mix of sizes drifts holds the sum of every
// class's peak rather than the peak of their sum. Chunks are kept per size (a power of two),
// within max_retained bytes over all sizes; beyond it the caller returns them to upstream.
// Every member function takes the pool's own mutex, a leaf lock: callers hold no class store
// lock while they call it.
#pragma once

#include <array>
#include <bit>
#include <cstddef>
#include <cstdint>
#include <mutex>

#include "size_class_chunk.hpp"
#include "size_class_policy.hpp"

namespace pmrkit::detail {

template <class Policy>
class empty_chunks {
 public:
  // An empty chunk of `chunk_bytes`, or nullptr if none is kept.
  chunk_header* take(std::size_t chunk_bytes) noexcept {
    const std::lock_guard lock(mutex_);
    chunk_list& list = lists_[slot_of(chunk_bytes)];
    chunk_header* const chunk = list.front();
    if (chunk) {
      list.remove(chunk);
      bytes_.subtract(chunk_bytes);
    }
    return chunk;
  }

  // Keeps `chunk` if the bytes kept stay within max_retained; otherwise returns false and the
  // caller gives it back to upstream.
  bool keep(chunk_header* chunk, std::size_t chunk_bytes, std::size_t max_retained) noexcept {
    const std::lock_guard lock(mutex_);
    if (bytes_.get() + chunk_bytes > max_retained) return false;
    bytes_.add(chunk_bytes);
    lists_[slot_of(chunk_bytes)].push_front(chunk);
    return true;
  }

  // Kept chunks, at least `bytes` of them if there are so many, the largest sizes first (so
  // that few go, and the chunks of the small classes, which most blocks are in, stay), chained
  // through next for the caller to return to upstream.
  chunk_header* take_for(std::size_t bytes) noexcept {
    const std::lock_guard lock(mutex_);
    chunk_header* taken = nullptr;
    std::size_t taken_bytes = 0;
    for (auto slot = static_cast<unsigned>(lists_.size()); slot-- > 0 && taken_bytes < bytes;) {
      const std::size_t size = smallest_chunk_bytes << slot;
      while (taken_bytes < bytes) {
        chunk_header* const chunk = lists_[slot].front();
        if (!chunk) break;
        lists_[slot].remove(chunk);
        chunk->next = taken;
        taken = chunk;
        taken_bytes += size;
      }
    }
    bytes_.subtract(taken_bytes);
    return taken;
  }

  // Every kept chunk, chained through next; each header records its own size.
  chunk_header* take_all() noexcept {
    const std::lock_guard lock(mutex_);
    chunk_header* all = nullptr;
    for (chunk_list& list : lists_) {
      while (chunk_header* const chunk = list.front()) {
        list.remove(chunk);
        chunk->next = all;
        all = chunk;
      }
    }
    bytes_.set(0);
    return all;
  }

  std::uint64_t bytes() const noexcept { return bytes_.get(); }

 private:
  static constexpr unsigned slot_of(std::size_t chunk_bytes) noexcept {
    return static_cast<unsigned>(std::bit_width(chunk_bytes / smallest_chunk_bytes)) - 1;
  }

  mutable typename policy_traits<Policy>::mutex mutex_;
  std::array<chunk_list, slot_of(largest_chunk_bytes) + 1> lists_{};
  typename policy_traits<Policy>::shared_counter bytes_;  // read by stats() without the lock
};

}  // namespace pmrkit::detail
