// The reference floor for the allocator patterns: a bare thread-local free list per 16-byte
// size class, behind the same std::pmr::memory_resource interface users call. No instance
// lookup, no statistics, no memory ever returned to the system before thread exit, no checks:
// nothing a real resource could drop is left to drop. Blocks above 4 KiB or aligned more
// than 16 bytes go to operator new. Any thread may free any block (it joins that thread's
// list). Benchmarks only.
#pragma once

#include <cstddef>
#include <memory_resource>

namespace pmrkit::bench {

class bare_list_resource final : public std::pmr::memory_resource {
 public:
  // Bytes all bare lists hold (process-wide: slabs are never returned before exit), plus the
  // blocks above 4 KiB in use.
  static std::size_t held_bytes() noexcept;
  // The most held_bytes() has been in this process, for the peak_held_bytes counter: by the
  // time a row reports, its large blocks are freed and held_bytes() leaves them out.
  static std::size_t peak_held_bytes() noexcept;

 private:
  void* do_allocate(std::size_t bytes, std::size_t alignment) override;
  void do_deallocate(void* p, std::size_t bytes, std::size_t alignment) override;
  bool do_is_equal(const std::pmr::memory_resource& other) const noexcept override {
    return this == &other;
  }
};

}  // namespace pmrkit::bench
