#include "pmrkit/mimalloc_resource.hpp"

#include <cstdio>
#include <cstdlib>
#include <new>

#include "mimalloc_loader.hpp"

namespace pmrkit {
namespace {

using detail::aligned_request_size;
using detail::mimalloc_malloc_alignment;
using detail::plain_request_size;

}  // namespace

mimalloc_resource::mimalloc_resource()
    : malloc_(detail::mimalloc().malloc),
      malloc_aligned_(detail::mimalloc().malloc_aligned),
      free_(detail::mimalloc().free) {}

void* mimalloc_resource::do_allocate(std::size_t bytes, std::size_t alignment) {
  void* p = alignment <= mimalloc_malloc_alignment
                ? malloc_(plain_request_size(bytes, alignment))
                : malloc_aligned_(aligned_request_size(bytes), alignment);
  if (!p) throw std::bad_alloc();
  return p;
}

// mi_free finds the size and alignment from the block itself.
void mimalloc_resource::do_deallocate(void* p, std::size_t, std::size_t) { free_(p); }

mimalloc_heap_resource::mimalloc_heap_resource()
    : heap_(detail::mimalloc().heap_new()),
      heap_malloc_(detail::mimalloc().heap_malloc),
      heap_malloc_aligned_(detail::mimalloc().heap_malloc_aligned),
      free_(detail::mimalloc().free),
      owner_(std::this_thread::get_id()) {
  if (!heap_) throw std::bad_alloc();
}

mimalloc_heap_resource::~mimalloc_heap_resource() {
  if (std::this_thread::get_id() != owner_) {
    // The heap is either gone (its thread ended, and mimalloc deleted it) or in that thread's
    // use; destroying it from here would corrupt mimalloc, and a destructor cannot throw.
    std::fputs("pmrkit: mimalloc_heap_resource destroyed on a thread other than the one that "
               "created it; a mimalloc heap belongs to its thread (and is deleted when that "
               "thread ends): destroy the resource on the thread that made it, before that "
               "thread exits. Aborting.\n",
               stderr);
    std::abort();
  }
  detail::mimalloc().heap_destroy(heap_);
}

void* mimalloc_heap_resource::do_allocate(std::size_t bytes, std::size_t alignment) {
  void* p = alignment <= mimalloc_malloc_alignment
                ? heap_malloc_(heap_, plain_request_size(bytes, alignment))
                : heap_malloc_aligned_(heap_, aligned_request_size(bytes), alignment);
  if (!p) throw std::bad_alloc();
  return p;
}

void mimalloc_heap_resource::do_deallocate(void* p, std::size_t, std::size_t) { free_(p); }

}  // namespace pmrkit
