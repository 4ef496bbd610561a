// Shared by the fuzz targets (and by the Catch2 tests that replay their corpora): an upstream
// that bounds what one input may allocate, and a loud failure for a broken invariant.
// Single-threaded, like a libFuzzer run.
#pragma once

#include <cstddef>
#include <cstdio>
#include <cstdlib>
#include <memory_resource>
#include <new>

namespace pmrkit::fuzz {

// An invariant the code under test promised does not hold: say which, then crash so libFuzzer
// keeps the input.
[[noreturn]] inline void broken(const char* what) {
  std::fprintf(stderr, "pmrkit fuzz: invariant broken: %s\n", what);
  std::abort();
}

// Forwards to new_delete, refusing (std::bad_alloc) any block above `max_block` bytes or any
// request that would take more than `max_total` bytes in use: fuzzed sizes are expected to
// fail cleanly, not to exhaust the machine. Counts live blocks so a target can check that
// everything came back.
class bounded_upstream final : public std::pmr::memory_resource {
 public:
  explicit bounded_upstream(std::size_t max_block = std::size_t{16} << 20,
                            std::size_t max_total = std::size_t{64} << 20) noexcept
      : max_block_(max_block), max_total_(max_total) {}
  std::size_t blocks_in_use() const noexcept { return blocks_; }
  std::size_t bytes_in_use() const noexcept { return bytes_; }

 private:
  void* do_allocate(std::size_t bytes, std::size_t alignment) override {
    if (bytes > max_block_ || bytes > max_total_ - bytes_) throw std::bad_alloc();
    void* p = std::pmr::new_delete_resource()->allocate(bytes, alignment);
    ++blocks_;
    bytes_ += bytes;
    return p;
  }
  void do_deallocate(void* p, std::size_t bytes, std::size_t alignment) override {
    if (blocks_ == 0 || bytes > bytes_) broken("a block was freed that was never allocated");
    --blocks_;
    bytes_ -= bytes;
    std::pmr::new_delete_resource()->deallocate(p, bytes, alignment);
  }
  bool do_is_equal(const std::pmr::memory_resource& other) const noexcept override {
    return this == &other;
  }

  std::size_t max_block_;
  std::size_t max_total_;
  std::size_t blocks_ = 0;
  std::size_t bytes_ = 0;
};

}  // namespace pmrkit::fuzz
