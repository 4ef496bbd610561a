// Internal: blocks a pool passes straight to upstream (too large, or aligned beyond what its
// chunks give). The pool must still return them if it is destroyed while they are live, so
// each carries a small header that links it into a list. Not thread-safe: the owner
// serialises calls (single-threaded pools need nothing; shared ones hold a lock).
#pragma once

#include <algorithm>
#include <cstddef>
#include <memory_resource>
#include <cstdint>
#include <new>

namespace pmrkit::detail {

class oversize_blocks {
 public:
  oversize_blocks() = default;
  oversize_blocks(const oversize_blocks&) = delete;
  oversize_blocks& operator=(const oversize_blocks&) = delete;

  void* allocate(std::pmr::memory_resource* upstream, std::size_t bytes, std::size_t alignment) {
    const std::size_t offset = header_offset(alignment);
    // Not SIZE_MAX: an upstream over libstdc++'s aligned operator new wraps sizes near it to a
    // tiny block, and no object exceeds PTRDIFF_MAX bytes.
    if (offset > PTRDIFF_MAX || bytes > PTRDIFF_MAX - offset) throw std::bad_alloc();
    // At least one byte past the header, so that a zero-byte block lies inside what upstream
    // gave rather than at its end, where another of upstream's blocks may begin.
    const std::size_t total = offset + std::max<std::size_t>(bytes, 1);
    auto* raw = static_cast<std::byte*>(upstream->allocate(total, upstream_alignment(alignment)));
    auto* h = reinterpret_cast<header*>(raw + offset - sizeof(header));
    h->prev = nullptr;
    h->next = head_;
    h->total = total;
    h->offset = offset;
    h->alignment_for_release = upstream_alignment(alignment);
    if (head_) head_->prev = h;
    head_ = h;
    bytes_ += h->total;
    return raw + offset;
  }

  void deallocate(std::pmr::memory_resource* upstream, void* p) noexcept {
    auto* h = reinterpret_cast<header*>(static_cast<std::byte*>(p) - sizeof(header));
    (h->prev ? h->prev->next : head_) = h->next;
    if (h->next) h->next->prev = h->prev;
    bytes_ -= h->total;
    upstream->deallocate(static_cast<std::byte*>(p) - h->offset, h->total,
                         h->alignment_for_release);
  }

  // Returns every block still live to upstream.
  void release_all(std::pmr::memory_resource* upstream) noexcept {
    while (head_) {
      header* h = head_;
      head_ = h->next;
      auto* block = reinterpret_cast<std::byte*>(h) + sizeof(header);
      upstream->deallocate(block - h->offset, h->total, h->alignment_for_release);
    }
    bytes_ = 0;
  }

  std::size_t bytes() const noexcept { return bytes_; }

 private:
  struct header {
    header* prev;
    header* next;
    std::size_t total;   // bytes taken from upstream
    std::size_t offset;  // from the upstream block to the user's block
    std::size_t alignment_for_release;
  };

  static constexpr std::size_t upstream_alignment(std::size_t alignment) noexcept {
    return std::max(alignment, alignof(header));
  }
  // The header sits just below the user's block, which must keep its alignment.
  static constexpr std::size_t header_offset(std::size_t alignment) noexcept {
    const std::size_t a = upstream_alignment(alignment);
    return (sizeof(header) + a - 1) / a * a;
  }

  header* head_ = nullptr;
  std::size_t bytes_ = 0;
};

}  // namespace pmrkit::detail
