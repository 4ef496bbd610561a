// pmrkit/testing/fault_injecting_resource.hpp — an upstream that fails on purpose.
//
// Forwards to its upstream, except that once armed with fail_at(n) the n-th allocate() from
// then on throws std::bad_alloc (and, when `sticky`, every allocate() after it as well, like
// memory that stays exhausted). Deallocations always pass through. Used by failure_sweep
// (failure_sweep.hpp) to fail an operation's 1st, 2nd, 3rd ... allocation in turn.
// Thread-safe: counters are atomics, so a pool that allocates on several threads can sit on
// it (which allocation counts as "n-th" then depends on the interleaving). Upstream is
// borrowed and must outlive it.
#pragma once

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <memory_resource>
#include <new>
#include <stdexcept>

namespace pmrkit::testing {

class fault_injecting_resource final : public std::pmr::memory_resource {
 public:
  // Throws std::invalid_argument for a null upstream.
  explicit fault_injecting_resource(
      std::pmr::memory_resource* upstream = std::pmr::new_delete_resource())
      : upstream_(upstream) {
    if (upstream == nullptr)
      throw std::invalid_argument("pmrkit: fault_injecting_resource was given a null upstream");
  }
  fault_injecting_resource(const fault_injecting_resource&) = delete;
  fault_injecting_resource& operator=(const fault_injecting_resource&) = delete;

  // The n-th allocation from now (n >= 1) fails; with `sticky`, so does every later one.
  void fail_at(std::uint64_t n, bool sticky = false) noexcept {
    sticky_.store(sticky, std::memory_order_relaxed);
    fired_.store(false, std::memory_order_relaxed);
    fail_at_.store(attempts_.load(std::memory_order_relaxed) + n, std::memory_order_relaxed);
  }
  // No more failures.
  void disarm() noexcept { fail_at_.store(never, std::memory_order_relaxed); }
  // Whether an armed failure has happened since the last fail_at().
  bool fired() const noexcept { return fired_.load(std::memory_order_relaxed); }
  // allocate() calls so far, failed ones included, and the failures among them.
  std::uint64_t attempts() const noexcept { return attempts_.load(std::memory_order_relaxed); }
  std::uint64_t failures() const noexcept { return failures_.load(std::memory_order_relaxed); }
  std::pmr::memory_resource* upstream_resource() const noexcept { return upstream_; }

 private:
  static constexpr std::uint64_t never = ~std::uint64_t{0};

  void* do_allocate(std::size_t bytes, std::size_t alignment) override {
    const std::uint64_t attempt = attempts_.fetch_add(1, std::memory_order_relaxed) + 1;
    const std::uint64_t target = fail_at_.load(std::memory_order_relaxed);
    if (attempt == target || (attempt > target && sticky_.load(std::memory_order_relaxed))) {
      fired_.store(true, std::memory_order_relaxed);
      failures_.fetch_add(1, std::memory_order_relaxed);
      throw std::bad_alloc();
    }
    return upstream_->allocate(bytes, alignment);
  }
  void do_deallocate(void* p, std::size_t bytes, std::size_t alignment) override {
    upstream_->deallocate(p, bytes, alignment);
  }
  bool do_is_equal(const std::pmr::memory_resource& other) const noexcept override {
    return this == &other;
  }

  std::pmr::memory_resource* upstream_;
  std::atomic<std::uint64_t> attempts_{0};
  std::atomic<std::uint64_t> failures_{0};
  std::atomic<std::uint64_t> fail_at_{never};
  std::atomic<bool> sticky_{false};
  std::atomic<bool> fired_{false};
};

}  // namespace pmrkit::testing
