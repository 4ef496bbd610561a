// pmrkit/mimalloc_resource.hpp — mimalloc as a memory resource, without replacing malloc.
//
// mimalloc_resource: mi_malloc (mi_malloc_aligned above 16-byte alignment) / mi_free.
// Thread-safe; blocks may be freed on any thread. Every instance shares mimalloc's own
// per-thread heaps; an instance only keeps the library's function pointers.
// mimalloc_heap_resource: a private mi_heap. Single-threaded and bound to its thread: allocate
// on, and destroy on, the thread that created it, before that thread exits (a mimalloc heap
// belongs to its thread, and mimalloc deletes it when the thread ends); blocks may be freed on
// any thread. Destroying it frees every block at once; destroyed on another thread, it prints
// why and aborts rather than corrupt mimalloc's state.
// Both take memory from mimalloc (the OS), not from an upstream resource. The library is
// loaded privately on first construction (see src/mimalloc_loader.hpp); construction throws
// std::runtime_error if it is not installed.
#pragma once

#include <cstddef>
#include <cstdint>
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

  // Copied from the loader once, so a call reaches mimalloc without a function-local static's
  // guard check.
  void* (*malloc_)(std::size_t size);
  void* (*malloc_aligned_)(std::size_t size, std::size_t alignment);
  void (*free_)(void* p);
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
  void* (*heap_malloc_)(void* heap, std::size_t size);
  void* (*heap_malloc_aligned_)(void* heap, std::size_t size, std::size_t alignment);
  void (*free_)(void* p);
  std::uint64_t owner_;  // the creating thread's number, never reused (unlike a thread id)
};

}  // namespace pmrkit
