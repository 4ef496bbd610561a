// pmrkit/single_writer_counter.hpp — a statistics counter one thread writes and any thread reads.
//
// For counts kept on a hot path (allocations served, datagrams received) that a stats() call
// on another thread reports. The writer updates with a relaxed atomic load and store, which
// compile to plain moves: no locked read-modify-write, unlike std::atomic's fetch_add, so
// counting costs what a plain integer costs. A reader gets a value the counter really had
// (never torn), possibly slightly stale.
//
// Thread safety: add, subtract and set from one thread at a time — the thread that owns the
// counter, or whoever holds the lock that guards it. Two threads writing at once lose
// updates; a counter several threads bump without a common lock wants std::atomic's
// fetch_add instead. get() from any thread at any time; it orders no other memory (relaxed).
// Not copyable or movable, like std::atomic.
#pragma once

#include <atomic>
#include <concepts>
#include <cstdint>

namespace pmrkit {

template <std::unsigned_integral Integer = std::uint64_t>
class single_writer_counter {
 public:
  constexpr single_writer_counter() noexcept = default;
  constexpr explicit single_writer_counter(Integer initial) noexcept : value_(initial) {}
  single_writer_counter(const single_writer_counter&) = delete;
  single_writer_counter& operator=(const single_writer_counter&) = delete;

  // Returns the new value, so the writer need not load it again (a compiler does not reuse
  // an atomic store's value by itself). Wraps around like the unsigned Integer it holds.
  Integer add(Integer n = 1) noexcept {
    const auto value = static_cast<Integer>(value_.load(std::memory_order_relaxed) + n);
    value_.store(value, std::memory_order_relaxed);
    return value;
  }
  void subtract(Integer n = 1) noexcept {
    value_.store(static_cast<Integer>(value_.load(std::memory_order_relaxed) - n),
                 std::memory_order_relaxed);
  }
  void set(Integer n) noexcept { value_.store(n, std::memory_order_relaxed); }

  Integer get() const noexcept { return value_.load(std::memory_order_relaxed); }

 private:
  std::atomic<Integer> value_{0};
};

}  // namespace pmrkit
