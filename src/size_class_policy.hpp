// Internal: what the sync and unsync policies of size_class_engine change.
//
// sync: per-thread caches, a mutex per shared class store, counters that other threads may
// read while their owner writes them. unsync: one cache owned by the resource, no locks and
// no atomic instructions at all.
#pragma once

#include <atomic>
#include <cstdint>
#include <mutex>

#include "pmrkit/single_writer_counter.hpp"
#include "pmrkit/size_class_resource.hpp"

namespace pmrkit::detail {

// The unsync policy's counterpart of single_writer_counter: the same calls, a plain integer.
template <class Integer>
class plain_counter {
 public:
  Integer add(Integer n) noexcept { return value_ += n; }
  void subtract(Integer n) noexcept { value_ -= n; }
  void set(Integer n) noexcept { value_ = n; }
  Integer get() const noexcept { return value_; }

 private:
  Integer value_ = 0;
};

// Updated by several threads (slow paths only), so a real atomic in the sync policy.
class shared_atomic_counter {
 public:
  std::uint64_t add(std::uint64_t n) noexcept {
    return value_.fetch_add(n, std::memory_order_relaxed) + n;
  }
  void subtract(std::uint64_t n) noexcept { value_.fetch_sub(n, std::memory_order_relaxed); }
  std::uint64_t get() const noexcept { return value_.load(std::memory_order_relaxed); }
  void raise_to(std::uint64_t n) noexcept {
    std::uint64_t seen = value_.load(std::memory_order_relaxed);
    while (seen < n && !value_.compare_exchange_weak(seen, n, std::memory_order_relaxed)) {
    }
  }
  void set(std::uint64_t n) noexcept { value_.store(n, std::memory_order_relaxed); }
  // Sets `desired` if the value is still `expected`; false if another thread changed it
  // first (so that one thread of several that saw the same value wins).
  bool replace(std::uint64_t expected, std::uint64_t desired) noexcept {
    return value_.compare_exchange_strong(expected, desired, std::memory_order_relaxed);
  }

 private:
  std::atomic<std::uint64_t> value_{0};
};

class shared_plain_counter {
 public:
  std::uint64_t add(std::uint64_t n) noexcept { return value_ += n; }
  void subtract(std::uint64_t n) noexcept { value_ -= n; }
  std::uint64_t get() const noexcept { return value_; }
  void raise_to(std::uint64_t n) noexcept {
    if (value_ < n) value_ = n;
  }
  void set(std::uint64_t n) noexcept { value_ = n; }
  bool replace(std::uint64_t expected, std::uint64_t desired) noexcept {
    if (value_ != expected) return false;
    value_ = desired;
    return true;
  }

 private:
  std::uint64_t value_ = 0;
};

// A sequence lock for data that one thread writes and other threads read now and then: the
// writer brackets a change with begin_write and end_write, a reader that saw the count odd or
// changed (read_again) reads again. Made of read-modify-writes and no fences, so that
// ThreadSanitizer follows it (GCC rejects std::atomic_thread_fence under -fsanitize=thread):
// the writer's acquiring begin_write and the reader's releasing read_again order a reader's
// loads before any store the writer makes after the change began, including the relaxed
// stores of later fast paths (Boehm, "Can seqlocks get along with programming language memory
// models?", 2012). Every change of the count is a read-modify-write, so that one release
// sequence runs through them all. For rare changes only: each is two locked instructions.
class atomic_sequence_lock {
 public:
  void begin_write() noexcept { count_.fetch_add(1, std::memory_order_acquire); }
  void end_write() noexcept { count_.fetch_add(1, std::memory_order_release); }
  std::uint64_t begin_read() const noexcept { return count_.load(std::memory_order_acquire); }
  // Whether what was read since begin_read returned `seen` may mix two states.
  bool read_again(std::uint64_t seen) const noexcept {
    return seen % 2 != 0 || count_.fetch_add(0, std::memory_order_release) != seen;
  }

 private:
  // Mutable as a mutex is: a reader's read-modify-write adds nothing.
  mutable std::atomic<std::uint64_t> count_{0};
};

// The unsync policy's counterpart: nobody reads while the one owner writes.
class plain_sequence_lock {
 public:
  void begin_write() noexcept {}
  void end_write() noexcept {}
  std::uint64_t begin_read() const noexcept { return 0; }
  bool read_again(std::uint64_t) const noexcept { return false; }
};

struct no_mutex {
  void lock() noexcept {}
  void unlock() noexcept {}
};

template <class Policy>
struct policy_traits;

template <>
struct policy_traits<sync_policy> {
  static constexpr bool per_thread_caches = true;
  // Threads' caches refill from chunks of their own shard of each class store
  // (size_class_store.hpp); caches are given shards in turn as they are made.
  static constexpr unsigned store_shards = 16;
  using mutex = std::mutex;
  // Written by the cache's thread, read by stats() on any thread.
  template <class Integer>
  using counter = single_writer_counter<Integer>;
  using shared_counter = shared_atomic_counter;
  using sequence_lock = atomic_sequence_lock;
};

template <>
struct policy_traits<unsync_policy> {
  static constexpr bool per_thread_caches = false;
  static constexpr unsigned store_shards = 1;
  using mutex = no_mutex;
  template <class Integer>
  using counter = plain_counter<Integer>;
  using shared_counter = shared_plain_counter;
  using sequence_lock = plain_sequence_lock;
};

}  // namespace pmrkit::detail
