// The plainest pmr wrapper over the privately loaded mimalloc, the yardstick for pmrkit's
// mimalloc strategy: mi_malloc for alignments up to 16, mi_malloc_aligned above, mi_free
// always, with the request sizes that give every block its alignment (src/mimalloc_loader.hpp:
// a 16-aligned size rounded up to a multiple of 16, since mimalloc's 8- and 24-byte classes
// are only 8-aligned). No check beyond a null result.
// Thread-safe as mimalloc is. Benchmarks only.
#pragma once

#include <cstddef>
#include <memory_resource>

namespace pmrkit::bench {

class mimalloc_plain_resource final : public std::pmr::memory_resource {
 public:
  mimalloc_plain_resource();

 private:
  void* do_allocate(std::size_t bytes, std::size_t alignment) override;
  void do_deallocate(void* p, std::size_t bytes, std::size_t alignment) override;
  bool do_is_equal(const std::pmr::memory_resource& other) const noexcept override {
    return this == &other;
  }

  void* (*malloc_)(std::size_t);
  void* (*malloc_aligned_)(std::size_t, std::size_t);
  void (*free_)(void*);
};

}  // namespace pmrkit::bench
