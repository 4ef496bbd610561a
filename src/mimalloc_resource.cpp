#include "pmrkit/mimalloc_resource.hpp"

#include <bit>
#include <new>
#include <stdexcept>

#include "mimalloc_loader.hpp"

namespace pmrkit {
namespace {

// mimalloc 2.0.9 (Debian 12) takes power-of-two sized small blocks to be naturally aligned, so
// mi_malloc_aligned(256, 256) (likewise 512 and 1024 with alignments from 256) returns a
// block aligned to 128 only. One more byte keeps such requests off that path.
constexpr std::size_t request_size(std::size_t bytes, std::size_t alignment) noexcept {
  return alignment > 16 && std::has_single_bit(bytes) ? bytes + 1 : bytes;
}

}  // namespace

mimalloc_resource::mimalloc_resource() { (void)detail::mimalloc(); }

void* mimalloc_resource::do_allocate(std::size_t bytes, std::size_t alignment) {
  void* p = detail::mimalloc().malloc_aligned(request_size(bytes, alignment), alignment);
  if (!p) throw std::bad_alloc();
  return p;
}

void mimalloc_resource::do_deallocate(void* p, std::size_t bytes, std::size_t alignment) {
  detail::mimalloc().free_size_aligned(p, request_size(bytes, alignment), alignment);
}

mimalloc_heap_resource::mimalloc_heap_resource() : heap_(detail::mimalloc().heap_new()) {
  if (!heap_) throw std::bad_alloc();
}

mimalloc_heap_resource::~mimalloc_heap_resource() { detail::mimalloc().heap_destroy(heap_); }

void* mimalloc_heap_resource::do_allocate(std::size_t bytes, std::size_t alignment) {
  void* p = detail::mimalloc().heap_malloc_aligned(heap_, request_size(bytes, alignment), alignment);
  if (!p) throw std::bad_alloc();
  return p;
}

void mimalloc_heap_resource::do_deallocate(void* p, std::size_t, std::size_t) {
  detail::mimalloc().free(p);
}

}  // namespace pmrkit
