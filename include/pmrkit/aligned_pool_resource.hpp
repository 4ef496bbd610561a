// pmrkit/aligned_pool_resource.hpp — the standard pool resources, with alignment honoured.
//
// libstdc++ 12's synchronized/unsynchronized_pool_resource pick a pool by size alone, so a
// block can be less aligned than requested (allocate(24, 16) can return an address that is
// 8 mod 16; GCC bug 118681). aligned_pool_resource<Pool> passes requests of alignment up to
// alignof(void*) straight through and serves stricter ones from a slightly larger block,
// remembering the offset just below the returned address.
// Thread-safety and ownership are those of Pool: synchronized_pool_resource may be shared
// between threads, unsynchronized_pool_resource may not. Upstream is borrowed; destroying the
// resource returns every chunk to upstream.
#pragma once

#include <cstddef>
#include <cstdint>
#include <cstring>
#include <memory_resource>
#include <new>

namespace pmrkit {

template <class Pool>
class aligned_pool_resource final : public std::pmr::memory_resource {
 public:
  aligned_pool_resource(const std::pmr::pool_options& options,
                        std::pmr::memory_resource* upstream)
      : pool_(options, upstream) {}

  Pool& pool() noexcept { return pool_; }
  void release() { pool_.release(); }

 private:
  // Every pool block is at least pointer-aligned, which is what the offset slot needs.
  static constexpr std::size_t native_alignment = alignof(void*);

  void* do_allocate(std::size_t bytes, std::size_t alignment) override {
    if (alignment <= native_alignment) return pool_.allocate(bytes, alignment);
    if (bytes > SIZE_MAX - alignment) throw std::bad_alloc();
    // The aligned address q lies in [p + 8, p + alignment], so the offset q - p fits in the
    // slot just below q, inside the block.
    auto* raw = static_cast<std::byte*>(pool_.allocate(bytes + alignment, native_alignment));
    const auto addr = reinterpret_cast<std::uintptr_t>(raw) + native_alignment;
    auto* aligned = raw + ((addr + alignment - 1) & ~(alignment - 1)) -
                    reinterpret_cast<std::uintptr_t>(raw);
    const std::size_t offset = static_cast<std::size_t>(aligned - raw);
    std::memcpy(aligned - sizeof offset, &offset, sizeof offset);
    return aligned;
  }

  void do_deallocate(void* p, std::size_t bytes, std::size_t alignment) override {
    if (alignment <= native_alignment) return pool_.deallocate(p, bytes, alignment);
    auto* aligned = static_cast<std::byte*>(p);
    std::size_t offset = 0;
    std::memcpy(&offset, aligned - sizeof offset, sizeof offset);
    pool_.deallocate(aligned - offset, bytes + alignment, native_alignment);
  }

  bool do_is_equal(const std::pmr::memory_resource& other) const noexcept override {
    return this == &other;
  }

  Pool pool_;
};

using aligned_sync_pool_resource = aligned_pool_resource<std::pmr::synchronized_pool_resource>;
using aligned_unsync_pool_resource =
    aligned_pool_resource<std::pmr::unsynchronized_pool_resource>;

}  // namespace pmrkit
