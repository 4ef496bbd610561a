// pmrkit/mimalloc_resource.hpp — mimalloc as a memory resource, without replacing malloc.
//
// mimalloc_resource: mi_malloc_aligned / mi_free_size_aligned. Thread-safe; blocks may be
// freed on any thread. Stateless: every instance shares mimalloc's own per-thread heaps.
// mimalloc_heap_resource: a private mi_heap. Single-threaded: allocate only on the thread that
// created it (a mimalloc heap belongs to its thread); destroying it frees every block at once.
// Both take memory from mimalloc (the OS), not from an upstream resource. The library is
// loaded privately on first construction (see src/mimalloc_loader.hpp); construction throws
// std::runtime_error if it is not installed.
#pragma once

#include <cstddef>
#include <memory_resource>

namespace pmrkit {

class mimalloc_resource final : public std::pmr::memory_resource {
 public:
  mimalloc_resource();

 private:
  void* do_allocate(std::size_t bytes, std::size_t alignment) override;
  void do_deallocate(void* p, std::size_t bytes, std::size_t alignment) override;
  bool do_is_equal(const std::pmr::memory_resource& other) const noexcept override {
    return this == &other;
  }
};

class mimalloc_heap_resource final : public std::pmr::memory_resource {
 public:
  mimalloc_heap_resource();
  ~mimalloc_heap_resource() override;
  mimalloc_heap_resource(const mimalloc_heap_resource&) = delete;
  mimalloc_heap_resource& operator=(const mimalloc_heap_resource&) = delete;

 private:
  void* do_allocate(std::size_t bytes, std::size_t alignment) override;
  void do_deallocate(void* p, std::size_t bytes, std::size_t alignment) override;
  bool do_is_equal(const std::pmr::memory_resource& other) const noexcept override {
    return this == &other;
  }

  void* heap_;  // mi_heap_t*, kept opaque so mimalloc.h stays out of this header
};

}  // namespace pmrkit
