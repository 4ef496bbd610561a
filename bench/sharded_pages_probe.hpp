// A design probe, not a strategy: the smallest pool built the way docs/size_class.md says
// size_class's store would have to be to free as cheaply as mimalloc ("A sharded store,
// probed"), measured beside size_class and mimalloc_plain when pmrkit_bench runs with
// --pmrkit_probes. Pages (1-16 slices of 4 KiB, sized as size_class sizes its chunks: about 128
// blocks, 4-64 KiB) each keep a free list threaded through their blocks, mimalloc's free-list
// sharding; their descriptors lie side by side in the first slice of a 256 KiB segment, so a
// free reaches its page with a mask, a shift and the class its size names, and touches only
// the block (a line the container has usually just read) and a dense descriptor. Allocation
// pops the current page of the class; a page's never-used blocks are threaded 4 KiB at a time.
//
// What it leaves out, and a strategy could not: threads (one thread, one resource: no owner,
// no cross-thread frees), statistics, trim and max_retained (an empty page waits for its slice
// count's next page until the probe is destroyed, which returns every segment to upstream).
// Requests above 16 KiB, or aligned past 16, go straight to upstream and back. It does not own
// upstream, which must outlive it.
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <memory_resource>

namespace pmrkit::bench {

class sharded_pages_probe final : public std::pmr::memory_resource {
 public:
  static constexpr std::size_t segment_bytes = std::size_t{256} << 10;
  static constexpr std::size_t slice_bytes = std::size_t{4} << 10;
  static constexpr std::size_t slices_per_segment = segment_bytes / slice_bytes;  // 64
  static constexpr std::size_t largest_pooled = std::size_t{16} << 10;

  explicit sharded_pages_probe(std::pmr::memory_resource* upstream);
  ~sharded_pages_probe() override;
  sharded_pages_probe(const sharded_pages_probe&) = delete;
  sharded_pages_probe& operator=(const sharded_pages_probe&) = delete;

 private:
  struct page {
    void* free = nullptr;          // blocks freed or threaded, linked through their first word
    std::uint32_t used = 0;        // blocks out
    std::uint32_t block_size = 0;
    std::byte* unthreaded = nullptr;  // the first block never threaded onto `free`
    std::byte* end = nullptr;         // past the last block
    page* prev = nullptr;          // in the class's queue; `next` also links empty pages
    page* next = nullptr;
    std::uint8_t size_class = 0;
    std::uint8_t slices = 0;
    bool queued = false;           // in the class's queue: not full
  };
  // At the start of every segment, in its first slice: a descriptor per slice, used for the
  // first slice of each page (a page of k slices starts at a multiple of k).
  struct segment {
    segment* next_segment = nullptr;
    std::uint64_t free_slices = 0;  // bit i: slice i belongs to no page yet
    alignas(64) std::array<page, slices_per_segment> pages;
  };
  static_assert(sizeof(segment) <= slice_bytes);

  struct page_queue {
    page* head = nullptr;  // where allocations come from
    page* tail = nullptr;
  };

  static constexpr std::size_t class_count = 36;  // 16-128 by 16, then 4 a doubling to 16 KiB

  void* do_allocate(std::size_t bytes, std::size_t alignment) override {
    if (bytes <= largest_pooled && alignment <= 16) [[likely]] {
      const unsigned c = class_of_[(bytes + 15) / 16];
      if (page* const pg = queues_[c].head) [[likely]] {
        if (void* const block = pg->free) [[likely]] {
          pg->free = *static_cast<void**>(block);
          ++pg->used;
          return block;
        }
      }
      return allocate_slow(c);
    }
    return upstream_->allocate(bytes, alignment);
  }

  void do_deallocate(void* p, std::size_t bytes, std::size_t alignment) override {
    if (bytes <= largest_pooled && alignment <= 16) [[likely]] {
      // The size names the class, the class its pages' slice count, and a page of k slices
      // starts at a multiple of k: its descriptor without a lookup table.
      const unsigned c = class_of_[(bytes + 15) / 16];
      const auto address = reinterpret_cast<std::uintptr_t>(p);
      auto* const seg = reinterpret_cast<segment*>(address & ~(segment_bytes - 1));
      const std::size_t slice = (address & (segment_bytes - 1)) / slice_bytes;
      page* const pg = &seg->pages[slice & ~std::size_t{class_slices_[c] - 1u}];
      *static_cast<void**>(p) = pg->free;
      pg->free = p;
      // A page that empties while allocations come from it stays as it is, so a class used a
      // block at a time takes no slow path; a full page rejoins its queue.
      if ((--pg->used == 0 && queues_[c].head != pg) || !pg->queued) [[unlikely]]
        return after_free_slow(pg);
      return;
    }
    upstream_->deallocate(p, bytes, alignment);
  }

  bool do_is_equal(const std::pmr::memory_resource& other) const noexcept override {
    return this == &other;
  }

  void* allocate_slow(unsigned c);
  void after_free_slow(page* pg) noexcept;
  page* new_page(unsigned c);
  page* format(page* pg, unsigned c) noexcept;
  static void push_front(page_queue& q, page* pg) noexcept;
  static void push_back(page_queue& q, page* pg) noexcept;
  static void remove(page_queue& q, page* pg) noexcept;

  std::pmr::memory_resource* const upstream_;
  std::array<std::uint8_t, largest_pooled / 16 + 1> class_of_{};
  std::array<std::uint32_t, class_count> class_size_{};
  std::array<std::uint8_t, class_count> class_slices_{};
  std::array<page_queue, class_count> queues_{};
  std::array<page*, 5> empty_pages_{};  // by slice count 1, 2, 4, 8, 16, linked through next
  segment* segments_ = nullptr;
};

}  // namespace pmrkit::bench
