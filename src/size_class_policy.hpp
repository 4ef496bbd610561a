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
};

template <>
struct policy_traits<unsync_policy> {
  static constexpr bool per_thread_caches = false;
  static constexpr unsigned store_shards = 1;
  using mutex = no_mutex;
  template <class Integer>
  using counter = plain_counter<Integer>;
  using shared_counter = shared_plain_counter;
};

}  // namespace pmrkit::detail
