#include "pmrkit/mimalloc_resource.hpp"

#include <bit>
#include <new>

#include "mimalloc_loader.hpp"

namespace pmrkit {
namespace {

// mi_malloc and mi_heap_malloc take mimalloc's fastest path, as a program calling malloc would.
// Their blocks are aligned to 16 (MI_MAX_ALIGN_SIZE) only when the size class is a multiple of
// 16: mi_malloc(1) and mi_malloc(24) may answer an address that is 8 mod 16 (8- and 24-byte
// classes). Rounding a 16-aligned request up to a multiple of 16 picks such a class; beyond 16
// only mi_malloc_aligned will do.
constexpr std::size_t mimalloc_alignment = 16;

constexpr std::size_t plain_request_size(std::size_t bytes, std::size_t alignment) noexcept {
  return alignment <= 8 ? bytes : (bytes + 15) & ~std::size_t{15};
}

// For the aligned path only: mimalloc 2.0.9 (Debian 12) takes power-of-two sized small blocks
// to be naturally aligned, so mi_malloc_aligned(256, 256) (likewise 512 and 1024 with
// alignments from 256) returns a block aligned to 128 only. One more byte keeps such requests
// off that path.
constexpr std::size_t aligned_request_size(std::size_t bytes) noexcept {
  return std::has_single_bit(bytes) ? bytes + 1 : bytes;
}

}  // namespace

mimalloc_resource::mimalloc_resource()
    : malloc_(detail::mimalloc().malloc),
      malloc_aligned_(detail::mimalloc().malloc_aligned),
      free_(detail::mimalloc().free) {}

void* mimalloc_resource::do_allocate(std::size_t bytes, std::size_t alignment) {
  void* p = alignment <= mimalloc_alignment
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
      free_(detail::mimalloc().free) {
  if (!heap_) throw std::bad_alloc();
}

mimalloc_heap_resource::~mimalloc_heap_resource() { detail::mimalloc().heap_destroy(heap_); }

void* mimalloc_heap_resource::do_allocate(std::size_t bytes, std::size_t alignment) {
  void* p = alignment <= mimalloc_alignment
                ? heap_malloc_(heap_, plain_request_size(bytes, alignment))
                : heap_malloc_aligned_(heap_, aligned_request_size(bytes), alignment);
  if (!p) throw std::bad_alloc();
  return p;
}

void mimalloc_heap_resource::do_deallocate(void* p, std::size_t, std::size_t) { free_(p); }

}  // namespace pmrkit
