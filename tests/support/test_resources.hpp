// Test helpers shared by the core and adapter suites: an upstream that fails on demand, and
// byte patterns that reveal overlapping or corrupted blocks.
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>
#include <initializer_list>
#include <limits>
#include <memory_resource>
#include <new>
#include <utility>

#include "pmrkit/counting_resource.hpp"

namespace pmrkit::test {

// Forwards to `upstream` until `allowed` allocations have succeeded, then throws
// std::bad_alloc for every further allocate() until allow() is called again. Deallocations
// always pass through. Not thread-safe on purpose: failure sweeps are single-threaded.
class failing_resource final : public std::pmr::memory_resource {
 public:
  explicit failing_resource(std::pmr::memory_resource* upstream = std::pmr::new_delete_resource(),
                            std::size_t allowed = std::numeric_limits<std::size_t>::max())
      : upstream_(upstream), allowed_(allowed) {}

  void allow(std::size_t allocations) noexcept {
    allowed_ = allocations;
    succeeded_ = 0;
  }
  void allow_all() noexcept { allow(std::numeric_limits<std::size_t>::max()); }
  std::size_t failures() const noexcept { return failures_; }

 private:
  void* do_allocate(std::size_t bytes, std::size_t alignment) override;
  void do_deallocate(void* p, std::size_t bytes, std::size_t alignment) override {
    upstream_->deallocate(p, bytes, alignment);
  }
  bool do_is_equal(const std::pmr::memory_resource& other) const noexcept override {
    return this == &other;
  }

  std::pmr::memory_resource* upstream_;
  std::size_t allowed_;
  std::size_t succeeded_ = 0;
  std::size_t failures_ = 0;
};

// Throws std::bad_alloc for the requests `refuses(bytes, alignment)` picks and takes the others
// from the process heap (new_delete_resource): an upstream that refuses some requests and not
// others (a chunk list's storage, a cache's slots). Thread-safe if `refuses` is.
class refusing_resource final : public std::pmr::memory_resource {
 public:
  explicit refusing_resource(std::function<bool(std::size_t, std::size_t)> refuses)
      : refuses_(std::move(refuses)) {}

 private:
  void* do_allocate(std::size_t bytes, std::size_t alignment) override {
    if (refuses_(bytes, alignment)) throw std::bad_alloc();
    return std::pmr::new_delete_resource()->allocate(bytes, alignment);
  }
  void do_deallocate(void* p, std::size_t bytes, std::size_t alignment) override {
    std::pmr::new_delete_resource()->deallocate(p, bytes, alignment);
  }
  bool do_is_equal(const std::pmr::memory_resource& other) const noexcept override {
    return this == &other;
  }

  std::function<bool(std::size_t, std::size_t)> refuses_;
};

// Writes a pattern derived from `seed` over the block; check_pattern() reports whether it is
// still intact. Distinct seeds per block reveal any overlap between live blocks.
void fill_pattern(void* p, std::size_t bytes, std::uint64_t seed) noexcept;
bool check_pattern(const void* p, std::size_t bytes, std::uint64_t seed) noexcept;

inline bool is_aligned(const void* p, std::size_t alignment) noexcept {
  return reinterpret_cast<std::uintptr_t>(p) % alignment == 0;
}

// Catch2 checks: allocates every size at every power-of-two alignment up to max_alignment,
// all live at once, and requires each block aligned as asked and untouched by the others
// until all are freed.
void check_alignment_and_overlap(std::pmr::memory_resource& r,
                                 std::initializer_list<std::size_t> sizes,
                                 std::size_t max_alignment);
// Catch2 checks: one block of `bytes` can be allocated, written, read back and freed.
void check_usable(std::pmr::memory_resource& r, std::size_t bytes, std::size_t alignment);

}  // namespace pmrkit::test
