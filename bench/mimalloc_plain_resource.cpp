#include "mimalloc_plain_resource.hpp"

#include <new>

#include "mimalloc_loader.hpp"

namespace pmrkit::bench {

mimalloc_plain_resource::mimalloc_plain_resource()
    : malloc_(detail::mimalloc().malloc),
      malloc_aligned_(detail::mimalloc().malloc_aligned),
      free_(detail::mimalloc().free) {}

void* mimalloc_plain_resource::do_allocate(std::size_t bytes, std::size_t alignment) {
  void* p = alignment <= detail::mimalloc_malloc_alignment
                ? malloc_(detail::plain_request_size(bytes, alignment))
                : malloc_aligned_(detail::aligned_request_size(bytes), alignment);
  if (!p) throw std::bad_alloc();
  return p;
}

void mimalloc_plain_resource::do_deallocate(void* p, std::size_t, std::size_t) { free_(p); }

}  // namespace pmrkit::bench
