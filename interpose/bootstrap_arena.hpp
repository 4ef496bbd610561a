// The allocations an interposer must serve before it knows the real allocator: dlsym, which it
// calls to find malloc and the rest, may itself call calloc. They come from a static, zeroed
// arena and are never given back; free() and realloc() recognise its blocks by address.
// Thread-safety: allocate() and contains() may be called from any thread.
#pragma once

#include <atomic>
#include <cstddef>

namespace pmrkit::interpose {

class bootstrap_arena {
 public:
  // A zeroed block of `bytes`, 64-byte aligned, or null once the arena is used up.
  void* allocate(std::size_t bytes) noexcept {
    const std::size_t rounded = (bytes + 63) & ~std::size_t{63};
    const std::size_t at = used_.fetch_add(rounded);
    if (at + rounded > sizeof bytes_) return nullptr;
    return bytes_ + at;
  }
  bool contains(const void* p) const noexcept {
    const auto* b = static_cast<const unsigned char*>(p);
    return b >= bytes_ && b < bytes_ + sizeof bytes_;
  }

 private:
  alignas(64) unsigned char bytes_[64 * 1024] = {};
  std::atomic<std::size_t> used_{0};
};

}  // namespace pmrkit::interpose
