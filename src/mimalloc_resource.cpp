#include "pmrkit/mimalloc_resource.hpp"

#include <atomic>
#include <cstdio>
#include <cstdlib>
#include <new>

#include "mimalloc_loader.hpp"

namespace pmrkit {
namespace {

using detail::aligned_request_size;
using detail::mimalloc_malloc_alignment;
using detail::plain_request_size;

// A number for the calling thread that no other thread gets, before or after: glibc hands an
// ended thread's id to the next thread, and a heap whose thread ended must not pass for the
// new thread's.
std::uint64_t this_thread_number() noexcept {
  static std::atomic<std::uint64_t> next{1};
  thread_local const std::uint64_t number = next.fetch_add(1, std::memory_order_relaxed);
  return number;
}

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
      owner_(this_thread_number()) {
  if (!heap_) throw std::bad_alloc();
}

mimalloc_heap_resource::~mimalloc_heap_resource() {
  if (this_thread_number() != owner_) {
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
