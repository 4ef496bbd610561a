#include "pmrkit/bson/global_allocator.hpp"

#include <bson/bson.h>

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <stdexcept>

namespace pmrkit::bson {
namespace {

// libbson's vtable is a table of plain functions with no context pointer, so the resource they
// serve from has to be reachable from a global: this one, set only while a scope exists.
std::atomic<std::pmr::memory_resource*> installed{nullptr};

constexpr std::size_t base_alignment = alignof(std::max_align_t);

// Stored just before every block handed to libbson: free and realloc get only the pointer.
struct block_header {
  std::size_t total;   // bytes allocated from the resource
  std::size_t offset;  // from the start of that allocation to the block libbson sees
};
static_assert(sizeof(block_header) <= base_alignment);

block_header* header_of(void* mem) {
  return reinterpret_cast<block_header*>(static_cast<std::byte*>(mem) - sizeof(block_header));
}

// Returns nullptr on failure: libbson reports it (and aborts) itself.
void* allocate_aligned(std::size_t alignment, std::size_t bytes) noexcept {
  std::pmr::memory_resource* resource = installed.load(std::memory_order_acquire);
  if (alignment < base_alignment) alignment = base_alignment;
  // The resource gives base_alignment; the header plus padding up to `alignment` then take at
  // most `alignment` bytes in front of the block.
  // PTRDIFF_MAX: no object is larger, and libstdc++'s aligned new wraps sizes near SIZE_MAX.
  if (alignment > PTRDIFF_MAX || bytes > PTRDIFF_MAX - alignment) return nullptr;
  const std::size_t total = bytes + alignment;
  void* raw;
  try {
    raw = resource->allocate(total, base_alignment);
  } catch (...) {
    return nullptr;
  }
  const auto start = reinterpret_cast<std::uintptr_t>(raw);
  std::uintptr_t user = start + sizeof(block_header);
  user = (user + alignment - 1) & ~static_cast<std::uintptr_t>(alignment - 1);
  void* mem = reinterpret_cast<void*>(user);
  *header_of(mem) = {total, static_cast<std::size_t>(user - start)};
  return mem;
}

void* vt_malloc(std::size_t bytes) { return allocate_aligned(base_alignment, bytes); }

void* vt_aligned_alloc(std::size_t alignment, std::size_t bytes) {
  return allocate_aligned(alignment, bytes);
}

void* vt_calloc(std::size_t count, std::size_t bytes) {
  if (bytes != 0 && count > SIZE_MAX / bytes) return nullptr;
  void* mem = allocate_aligned(base_alignment, count * bytes);
  if (mem) std::memset(mem, 0, count * bytes);
  return mem;
}

void vt_free(void* mem) {
  if (mem == nullptr) return;
  const block_header h = *header_of(mem);
  installed.load(std::memory_order_acquire)
      ->deallocate(static_cast<std::byte*>(mem) - h.offset, h.total, base_alignment);
}

void* vt_realloc(void* mem, std::size_t bytes) {
  if (mem == nullptr) return vt_malloc(bytes);
  if (bytes == 0) {
    vt_free(mem);
    return nullptr;
  }
  const block_header h = *header_of(mem);
  const std::size_t old_bytes = h.total - h.offset;
  void* fresh = vt_malloc(bytes);
  if (fresh == nullptr) return nullptr;  // the old block stays valid, as with realloc()
  std::memcpy(fresh, mem, old_bytes < bytes ? old_bytes : bytes);
  vt_free(mem);
  return fresh;
}

}  // namespace

global_allocator_scope::global_allocator_scope(std::pmr::memory_resource* resource) {
  if (resource == nullptr) {
    throw std::invalid_argument("pmrkit::bson::global_allocator_scope: null resource");
  }
  std::pmr::memory_resource* expected = nullptr;
  if (!installed.compare_exchange_strong(expected, resource, std::memory_order_acq_rel)) {
    throw std::logic_error("pmrkit::bson::global_allocator_scope: one is already installed; "
                           "libbson has a single process-wide allocator, so only one scope may "
                           "exist at a time");
  }
  bson_mem_vtable_t vtable{};
  vtable.malloc = vt_malloc;
  vtable.calloc = vt_calloc;
  vtable.realloc = vt_realloc;
  vtable.free = vt_free;
  vtable.aligned_alloc = vt_aligned_alloc;
  bson_mem_set_vtable(&vtable);
}

global_allocator_scope::~global_allocator_scope() {
  bson_mem_restore_vtable();
  installed.store(nullptr, std::memory_order_release);
}

}  // namespace pmrkit::bson
