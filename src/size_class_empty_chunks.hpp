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
    chunk_header* const chunk = lists_[slot_of(chunk_bytes)].pop();
    if (chunk) bytes_.subtract(chunk_bytes);
    return chunk;
  }

  // Up to `wanted` empty chunks of `chunk_bytes` into out[0..), under one lock; how many.
  std::uint32_t take_some(std::size_t chunk_bytes, std::uint32_t wanted,
                          chunk_header** out) noexcept {
    const std::lock_guard lock(mutex_);
    chunk_stack& list = lists_[slot_of(chunk_bytes)];
    std::uint32_t taken = 0;
    while (taken < wanted) {
      chunk_header* const chunk = list.pop();
      if (!chunk) break;
      out[taken++] = chunk;
    }
    bytes_.subtract(taken * chunk_bytes);
    return taken;
  }

  // Keeps the chunks of `chain` (linked through next, each recording its size) while the bytes
  // kept stay within max_retained, under one lock; returns those that did not fit, chained in
  // their order, for the caller to give back to upstream (the order upstream sees the frees in
  // shapes glibc's heap top, which it trims).
  chunk_header* keep_some(chunk_header* chain, std::size_t max_retained) noexcept {
    const std::lock_guard lock(mutex_);
    chunk_header* rest = nullptr;
    chunk_header** rest_end = &rest;
    while (chain) {
      chunk_header* const next = chain->next;
      if (bytes_.get() + chain->bytes <= max_retained) {
        bytes_.add(chain->bytes);
        lists_[slot_of(chain->bytes)].push(chain);
      } else {
        *rest_end = chain;
        rest_end = &chain->next;
      }
      chain = next;
    }
    *rest_end = nullptr;
    return rest;
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
        chunk_header* const chunk = lists_[slot].pop();
        if (!chunk) break;
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
    for (chunk_stack& list : lists_) {
      while (chunk_header* const chunk = list.pop()) {
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

  // The chunks of one size, last kept first taken, linked through next alone: keeping or
  // taking a chunk writes its own header and no neighbour's. A chunk that comes back whole
  // (a request arena's, over this pool) is cold, and a doubly linked list made each keep and
  // each take miss on a second chunk's line as well.
  class chunk_stack {
   public:
    void push(chunk_header* chunk) noexcept {
      chunk->next = top_;
      top_ = chunk;
    }
    chunk_header* pop() noexcept {
      chunk_header* const chunk = top_;
      if (chunk) top_ = chunk->next;
      return chunk;
    }

   private:
    chunk_header* top_ = nullptr;
  };

  mutable typename policy_traits<Policy>::mutex mutex_;
  std::array<chunk_stack, slot_of(largest_chunk_bytes) + 1> lists_{};
  typename policy_traits<Policy>::shared_counter bytes_;  // read by stats() without the lock
};

}  // namespace pmrkit::detail
