#include "pmrkit/mimalloc_resource.hpp"

#include <new>
#include <stdexcept>

#include "factories.hpp"
#include "mimalloc_loader.hpp"

namespace pmrkit {

mimalloc_resource::mimalloc_resource() { (void)detail::mimalloc(); }

void* mimalloc_resource::do_allocate(std::size_t bytes, std::size_t alignment) {
  void* p = detail::mimalloc().malloc_aligned(bytes, alignment);
  if (!p) throw std::bad_alloc();
  return p;
}

void mimalloc_resource::do_deallocate(void* p, std::size_t bytes, std::size_t alignment) {
  detail::mimalloc().free_size_aligned(p, bytes, alignment);
}

mimalloc_heap_resource::mimalloc_heap_resource() : heap_(detail::mimalloc().heap_new()) {
  if (!heap_) throw std::bad_alloc();
}

mimalloc_heap_resource::~mimalloc_heap_resource() { detail::mimalloc().heap_destroy(heap_); }

void* mimalloc_heap_resource::do_allocate(std::size_t bytes, std::size_t alignment) {
  void* p = detail::mimalloc().heap_malloc_aligned(heap_, bytes, alignment);
  if (!p) throw std::bad_alloc();
  return p;
}

void mimalloc_heap_resource::do_deallocate(void* p, std::size_t, std::size_t) {
  detail::mimalloc().free(p);
}

namespace detail {

resource_ptr make_mimalloc(option_reader&, std::pmr::memory_resource*) {
  return std::make_unique<mimalloc_resource>();
}

resource_ptr make_mimalloc_heap(option_reader&, std::pmr::memory_resource*) {
  return std::make_unique<mimalloc_heap_resource>();
}

}  // namespace detail
}  // namespace pmrkit
