// A design probe, not a strategy: the smallest pool built the way size_class's store would
// have to be to free as cheaply as mimalloc (docs/size_class_containers.md, "A sharded store,
// probed"), measured beside size_class and mimalloc_plain when pmrkit_bench runs with
// --pmrkit_probes, or by pmrkit_interleaved. Pages of 4 KiB slices, sized as size_class sizes
// its chunks (about 128 blocks, at least one slice, at most LargestPageSlices), each keep a
// free list threaded through their blocks, mimalloc's free-list sharding; their descriptors lie
// side by side at the start of a segment of SegmentBytes, so a free reaches its page with a
// mask, a shift and the class its size names, and touches only the block (a line the container
// has usually just read) and a dense descriptor. Allocation pops the current page of the class;
// a page's never-used blocks are threaded 4 KiB at a time. A page that empties gives its slices
// back to its segment, for a page of any size.
//   sharded_pages_probe       256 KiB segments, pages of 1-16 slices (4-64 KiB)
//   sharded_pages_probe_1m    1 MiB segments, pages of 1-64 slices (4-256 KiB): the classes from
//                             512 bytes up get their 128 blocks, or 64 of 4 KiB, so that a
//                             class with a few dozen live blocks does not cross pages every
//                             few calls
//   sharded_pages_probe_grow  as _1m, but a class's first page holds one block (one slice at
//                             least) and each next page twice the slices, up to the class's
//                             most, so that a class used one block at a time (a hash table's
//                             buckets) does not hold a page of 256 KiB for it. Pages then lie
//                             anywhere in their segment, and a free finds its page through the
//                             offset kept in each slice's descriptor: one more load
//   sharded_pages_probe_owned as _1m, but each thread has page queues of its own (a heap), found
//                             by allocation as size_class finds a thread's cache
//                             (thread_cache_directory.hpp: the thread's last cache, each use
//                             bracketed for trim()), and a free pushes onto its page only if
//                             the calling thread owns it (its identity is in the page); a free
//                             on another thread pushes onto the page's atomic list, which the owner
//                             collects when the page runs dry, and a full page's first such
//                             free hands the page back to its owner (mimalloc's delayed free,
//                             simplified): the price of owner threads, measured
//   sharded_pages_probe_chunks no segments: each page is a chunk of its own from upstream,
//                             aligned to its size (the page sizes of the first geometry, as
//                             size_class sizes its chunks), its descriptor at its start, found
//                             on free with a mask the class names. A class's current page that
//                             empties is kept for the class until a page of any class would
//                             raise the most the probe has held; then it goes, and kept empty
//                             chunks after it (size_class's make_room_for), so that memory held
//                             follows what is live, without segment slack
//   sharded_pages_probe_owned_chunks  the chunks' layout with the owned geometry's threads
//   sharded_pages_probe_owned_lean  the owned geometry in the first one's segments (256 KiB,
//                             pages of 1-16 slices), with the chunks' release of emptied current
//                             pages (their slices go back to the segment before a new segment
//                             would be taken): whether segments can hold as little as chunks
//   sharded_pages_probe_owned_spans  the owned chunks, taken from upstream in spans of up to
//                             four chunks of one size (a size's first span one chunk, then
//                             doubling), so that its pages lie side by side; a span goes back
//                             whole, when every chunk of it is empty
// The owned geometries take frees from any thread; the others are for one thread at a time.
//
// What it leaves out, and a strategy could not: statistics, trim and max_retained (segments
// never go back before the probe is destroyed, which returns everything to upstream; chunk
// pages keep at most 4 MiB of empty chunks). A thread's exit hands its pages on (owned pages:
// empty ones go back, the rest wait, abandoned, for the next thread that makes a heap).
// Requests above 16 KiB, or aligned past 16, go straight to upstream and back (in the chunk
// geometries after the same make-room step as a new chunk, as size_class's large blocks do).
// It does not own upstream, which must outlive it.
#pragma once

#include <array>
#include <atomic>
#include <bit>
#include <cstddef>
#include <cstdint>
#include <memory_resource>
#include <mutex>
#include <type_traits>

#include "thread_cache_directory.hpp"

namespace pmrkit::bench {

// What a geometry chooses (the list above names each one).
struct probe_geometry {
  std::size_t segment_bytes = std::size_t{256} << 10;
  std::size_t largest_page_slices = 16;  // a page's most slices of 4 KiB
  bool growing_pages = false;
  bool owned_pages = false;
  bool chunk_pages = false;
  // A class's current page that empties is noted, and goes before memory held would rise.
  bool release_empty_heads = false;
  // Chunk pages: the most chunks of one size taken from upstream in one request (a span), so
  // that they lie side by side; a size's spans start at one chunk and double.
  unsigned span_chunks = 1;
};

template <probe_geometry Geometry>
class basic_sharded_pages_probe final : public std::pmr::memory_resource {
  static constexpr bool growing_pages = Geometry.growing_pages;
  static constexpr bool owned_pages = Geometry.owned_pages;
  static constexpr bool chunk_pages = Geometry.chunk_pages;
  static constexpr bool release_empty_heads = Geometry.release_empty_heads;

 public:
  static constexpr std::size_t segment_bytes = Geometry.segment_bytes;
  static constexpr std::size_t slice_bytes = std::size_t{4} << 10;
  static constexpr std::size_t slices_per_segment = segment_bytes / slice_bytes;
  static constexpr std::size_t largest_pooled = std::size_t{16} << 10;
  static constexpr std::size_t largest_page_slices = Geometry.largest_page_slices;
  static_assert(slices_per_segment % 64 == 0 && std::has_single_bit(largest_page_slices) &&
                largest_page_slices <= 64 && largest_page_slices < slices_per_segment);

  explicit basic_sharded_pages_probe(std::pmr::memory_resource* upstream);
  ~basic_sharded_pages_probe() override;
  basic_sharded_pages_probe(const basic_sharded_pages_probe&) = delete;
  basic_sharded_pages_probe& operator=(const basic_sharded_pages_probe&) = delete;

 private:
  struct heap;
  // 64 bytes: with the array aligned, one cache line per page, never two.
  struct page {
    void* free = nullptr;   // blocks freed or threaded, linked through their first word
    heap* owner = nullptr;  // whose queues it is in (owned pages: a thread's)
    // Owned pages: blocks freed on other threads, linked through their first word, for the
    // owner to collect; full_mark while the page is full, out of its queue, and its owner wants
    // to hear of the first block that comes back.
    std::atomic<std::uintptr_t> thread_free{0};
    union {
      std::byte* unthreaded = nullptr;  // the first block never threaded onto `free`
      // Owned pages, while full and marked (every block threaded long since): the next page of
      // its heap's returned list, written by the free that took the mark.
      page* next_returned;
    };
    // Owned pages: the owner's thread, the address of its directory (unique among live
    // threads), which a free compares with its own without reading the heap; null while the
    // page's heap is abandoned, so that every free takes the path of a free from another
    // thread, even on a new thread that got a dead one's directory address.
    std::atomic<const void*> thread{nullptr};
    page* prev = nullptr;  // in the class's queue, or (full, owned pages) the heap's full list
    page* next = nullptr;
    std::uint16_t used = 0;        // blocks out, those on thread_free included
    std::uint16_t never_used = 0;  // blocks from `unthreaded` on
    std::uint8_t size_class = 0;
    std::uint8_t slices = 0;
    // Growing pages: in the descriptor of each slice of a page, how far the page's first slice
    // lies before it (0 in the first's own), so that a free finds the page whatever its size.
    std::uint8_t offset = 0;
    bool queued = false;  // in the class's queue: not full
  };
  static constexpr std::uintptr_t full_mark = 1;
  static_assert(sizeof(page) == 64);
  // At the start of every segment, in its first slices: a descriptor per slice, used for the
  // first slice of each page (fixed pages: a page of k slices starts at a multiple of k; growing
  // pages: anywhere, the descriptors of its other slices holding their offset).
  struct segment {
    segment* next_segment = nullptr;
    std::array<std::uint64_t, slices_per_segment / 64> free_slices{};  // bit i: slice i free
    alignas(64) std::array<page, slices_per_segment> pages;
  };
  static constexpr std::size_t header_slices = (sizeof(segment) + slice_bytes - 1) / slice_bytes;

  struct page_queue {
    page* head = nullptr;  // where allocations come from
    page* tail = nullptr;
  };

  static constexpr std::size_t class_count = 36;  // 16-128 by 16, then 4 a doubling to 16 KiB
  static_assert(class_count <= 64);               // a bit each in heap::empty_heads

  // The page queues, one per class: the probe's own, or (owned pages) one per thread, kept in
  // the engine's thread-cache directory (thread_cache_directory.hpp) as size_class's caches
  // are. When a thread exits its pages move to a heap of the probe's, abandoned, which the next
  // thread to make a heap adopts (mimalloc abandons a thread's segments and reclaims them so),
  // so blocks freed into a dead thread's pages are used again and its pages can empty.
  struct heap {
    std::array<page_queue, class_count> queues{};
    // Owned pages: full pages, out of their queues, each carrying full_mark until a block
    // comes back.
    page_queue full;
    // Full pages to which another thread freed a block, linked through next_returned: the
    // first such free takes the page's full_mark and links it here, once; the owner puts them
    // back in their queues at its next slow path.
    std::atomic<page*> returned{nullptr};
    // release_empty_heads: bit c, class c's current page emptied since the heap last looked.
    std::uint64_t empty_heads = 0;
    // Owned pages, a thread's heap: the probe's heap its pages move to when the thread exits
    // (the abandoned heap it adopted, or one made with it), so that an exit allocates nothing.
    heap* spare = nullptr;
    heap* next_heap = nullptr;       // the probe's heaps: in heaps_, every one made
    heap* next_abandoned = nullptr;  // in abandoned_
  };
  using thread_heaps = detail::thread_caches<basic_sharded_pages_probe, heap>;
  friend thread_heaps;
  // A thread exits (on that thread, while the probe is alive): its pages with no block out go
  // back, the rest move to its spare heap, abandoned for the next thread to adopt. Each full
  // page's mark is taken back first, or, where another thread's free took it, the page waited
  // for until that free has linked it into the returned list: after that no free reads the
  // dying heap.
  void absorb_exiting_cache(heap& h) noexcept;

  void* do_allocate(std::size_t bytes, std::size_t alignment) override {
    if (bytes <= largest_pooled && alignment <= 16) [[likely]] {
      const unsigned c = class_of_[(bytes + 15) / 16];
      if constexpr (owned_pages) {
        // size_class's fast path: the thread's last cache, a use bracketed for trim().
        if (detail::cache_link* const link = detail::this_thread_caches.last) [[likely]] {
          detail::begin_fast_use();
          if (link->owner.load(std::memory_order_relaxed) == this) [[likely]] {
            if (page* const pg = thread_heaps::cache_of(link).queues[c].head) [[likely]] {
              if (void* const block = pg->free) [[likely]] {
                pg->free = *static_cast<void**>(block);
                ++pg->used;
                detail::end_fast_use();
                return block;
              }
            }
          }
          detail::end_fast_use();
        }
        return allocate_slow(c);
      }
      if (page* const pg = own_heap_.queues[c].head) [[likely]] {
        if (void* const block = pg->free) [[likely]] {
          pg->free = *static_cast<void**>(block);
          ++pg->used;
          return block;
        }
      }
      return allocate_slow(c);
    }
    return allocate_large(bytes, alignment);
  }

  void do_deallocate(void* p, std::size_t bytes, std::size_t alignment) override {
    if (bytes <= largest_pooled && alignment <= 16) [[likely]] {
      // The size names the class, the class its pages' slice count, and a page of k slices
      // starts at a multiple of k (in its segment, or as a chunk of its own): its descriptor
      // without a lookup table.
      const unsigned c = class_of_[(bytes + 15) / 16];
      const auto address = reinterpret_cast<std::uintptr_t>(p);
      page* pg = nullptr;
      if constexpr (chunk_pages) {
        pg = reinterpret_cast<page*>(address &
                                     ~(std::uintptr_t{class_slices_[c]} * slice_bytes - 1));
      } else {
        auto* const seg = reinterpret_cast<segment*>(address & ~(segment_bytes - 1));
        const std::size_t slice = (address & (segment_bytes - 1)) / slice_bytes;
        if constexpr (growing_pages)
          pg = &seg->pages[slice] - seg->pages[slice].offset;
        else
          pg = &seg->pages[slice & ~std::size_t{class_slices_[c] - 1u}];
      }
      if constexpr (owned_pages) {
        // A free on the thread whose heap owns the page: the thread's identity against the
        // page's, no lookup of the thread's cache and no bracket
        // (docs/size_class_containers.md, "Owner threads, priced": why an engine's trim() could
        // do without one). From another thread the block goes onto the page's atomic list.
        if (pg->thread.load(std::memory_order_relaxed) != &detail::this_thread_caches) [[unlikely]]
          return free_from_other_thread(pg, p);
        *static_cast<void**>(p) = pg->free;
        pg->free = p;
        if (needs_slow_path_after_free(*pg->owner, pg, c, --pg->used == 0)) [[unlikely]]
          return after_free_slow(pg);
        return;
      }
      *static_cast<void**>(p) = pg->free;
      pg->free = p;
      if (needs_slow_path_after_free(own_heap_, pg, c, --pg->used == 0)) [[unlikely]]
        return after_free_slow(pg);
      return;
    }
    deallocate_large(p, bytes, alignment);
  }

  bool do_is_equal(const std::pmr::memory_resource& other) const noexcept override {
    return this == &other;
  }

  void* allocate_slow(unsigned c);
  // After a free into pg (of class c, in h) by its owner: whether the page was full (out of
  // its queue: it rejoins), or emptied and is not its class's current page (it goes back). A
  // current page that empties stays, so that a class used a block at a time (a pair: one block
  // allocated and freed) takes no slow path; with release_empty_heads it is noted once, so that
  // it can go before memory held rises, and frees that empty it again find the note.
  static bool needs_slow_path_after_free(const heap& h, const page* pg, unsigned c,
                                         bool emptied) noexcept {
    if (!pg->queued) return true;
    if (!emptied) return false;
    if (h.queues[c].head != pg) return true;
    return release_empty_heads && !(h.empty_heads >> c & 1);
  }
  // Requests no class takes, straight to upstream and back; with chunk pages counted in memory
  // held, and preceded by make_room as a page's chunk is (size_class's large blocks are too).
  void* allocate_large(std::size_t bytes, std::size_t alignment);
  void deallocate_large(void* p, std::size_t bytes, std::size_t alignment) noexcept;
  // The calling thread's queues (owned pages: on its first call, an abandoned heap adopted or
  // a new one made).
  heap& current_heap();
  // Owned pages: the calling thread's first heap, with the pages of an abandoned one if any.
  heap& adopt_or_make_heap();
  // Owned pages: moves every page of `from` into `to` (an empty heap), each owned by `thread`.
  static void move_pages(heap& from, heap& to, const void* thread) noexcept;
  // Owned pages: the pages of a returned list back into their queues, or released if empty;
  // how many there were.
  std::size_t take_returned(heap& h, page* list) noexcept;
  // Owned pages: pushes p onto pg's thread_free; if that takes the page's full_mark, links the
  // page into its heap's returned list.
  static void free_from_other_thread(page* pg, void* p) noexcept;
  // Owned pages, on the owner's thread: moves the blocks on thread_free onto free.
  static void collect(page* pg) noexcept;
  void after_free_slow(page* pg) noexcept;
  // Gives an empty page back: its slices to its segment, or (chunk pages) its chunk to
  // keep_or_free.
  void release_page(page* pg) noexcept;
  // A new page of class c for heap h (formatted; h's queues are the caller's to change).
  page* new_page(heap& h, unsigned c);
  // Under segments_mutex_: h's current pages of classes other than c that emptied since they
  // were noted go (release_page_locked).
  void release_noted_heads(heap& h, unsigned c) noexcept;
  void release_page_locked(page* pg) noexcept;
  // k (<= 64) low bits set.
  static std::uint64_t run_of(unsigned k) noexcept {
    return k == 64 ? ~std::uint64_t{0} : (std::uint64_t{1} << k) - 1;
  }
  static bool slices_free(const segment& seg, unsigned first, unsigned k) noexcept;
  static void mark_slices(segment& seg, unsigned first, unsigned k, bool free) noexcept;
  static segment* segment_of(const void* p) noexcept {
    return reinterpret_cast<segment*>(reinterpret_cast<std::uintptr_t>(p) & ~(segment_bytes - 1));
  }
  page* format(page* pg, unsigned c, unsigned k) noexcept;  // a segment's page of k slices
  // A fresh descriptor for a page of class c, k slices, its blocks from `first` up to `end`.
  page* format(page* pg, unsigned c, unsigned k, std::byte* first, std::byte* end) noexcept;
  static void push_front(page_queue& q, page* pg) noexcept;
  static void push_back(page_queue& q, page* pg) noexcept;
  static void remove(page_queue& q, page* pg) noexcept;

  std::pmr::memory_resource* const upstream_;
  std::array<std::uint8_t, largest_pooled / 16 + 1> class_of_{};
  std::array<std::uint32_t, class_count> class_size_{};
  std::array<std::uint8_t, class_count> class_slices_{};  // a page's slices (growing: the most)
  std::array<std::uint8_t, class_count> next_slices_{};   // growing: the class's next page
  heap own_heap_;                                         // unowned pages
  heap* heaps_ = nullptr;      // owned pages: the probe's heaps, guarded by segments_mutex_
  heap* abandoned_ = nullptr;  // owned pages: the pages of threads that exited, guarded by the same
  struct no_lock {
    void lock() noexcept {}
    void unlock() noexcept {}
  };
  // Owned pages: the segments and their slices are shared by the threads' heaps.
  [[no_unique_address]] std::conditional_t<owned_pages, std::mutex, no_lock> segments_mutex_;
  segment* segments_ = nullptr;  // guarded by segments_mutex_

  // Chunk pages: a page's chunk starts with its descriptor. Chunks come from upstream in spans
  // of chunks of one size (a span of one: a chunk of its own), whose state lies in the first
  // chunk's header, memory held as long as the span is.
  struct chunk {
    page pg;
    chunk* span = nullptr;  // the first chunk of its span
    // In a span's first chunk only:
    chunk* prev_span = nullptr;  // every span held
    chunk* next_span = nullptr;
    chunk* prev_room = nullptr;  // a size's spans with a chunk free, some of them in use
    chunk* next_room = nullptr;
    std::uint64_t free_chunks = 0;  // bit i: the span's chunk i holds no page
    std::uint32_t chunks = 0;
    std::uint8_t slices = 0;  // of each chunk
  };
  static_assert(Geometry.span_chunks >= 1 && Geometry.span_chunks <= 64);
  // A chunk of k slices for a page (under segments_mutex_): from a span in use, else a kept
  // empty span, else, after make_room, a new span.
  chunk* take_chunk(heap& h, unsigned c, unsigned k);
  // A chunk whose page emptied goes back to its span; a span that empties is kept for chunks
  // of its size, within max_kept_bytes, or goes back to upstream.
  void keep_or_free(chunk* ch) noexcept;
  // Before `bytes` more from upstream would raise the most ever held (size_class's
  // make_room_for): h's current pages of classes other than c that emptied go first, then kept
  // empty spans of other sizes. c == class_count: for a large block.
  void make_room(heap& h, unsigned c, std::size_t bytes) noexcept;
  void free_span(chunk* span) noexcept;
  static void unlink(chunk*& head, chunk* span, chunk* chunk::*prev, chunk* chunk::*next) noexcept;
  static void link(chunk*& head, chunk* span, chunk* chunk::*prev, chunk* chunk::*next) noexcept;
  static constexpr std::size_t max_kept_bytes = std::size_t{4} << 20;  // size_class's default
  chunk* spans_ = nullptr;
  std::array<chunk*, largest_page_slices + 1> room_{};         // by slices: some chunks free
  std::array<chunk*, largest_page_slices + 1> empty_spans_{};  // by slices: kept, all free
  std::array<std::uint8_t, largest_page_slices + 1> next_span_chunks_{};
  std::size_t empty_bytes_ = 0;  // in kept empty spans
  std::size_t held_ = 0;         // bytes from upstream in spans
  std::size_t peak_held_ = 0;
  // Owned pages: each thread's reference to its heap (the destructor detaches them before the
  // heaps and the memory go).
  struct no_heaps {};
  [[no_unique_address]] std::conditional_t<owned_pages, thread_heaps, no_heaps> thread_heaps_{};
};

inline constexpr probe_geometry first_geometry{};
inline constexpr probe_geometry geometry_1m{.segment_bytes = std::size_t{1} << 20,
                                            .largest_page_slices = 64};
inline constexpr probe_geometry grow_geometry{
    .segment_bytes = std::size_t{1} << 20, .largest_page_slices = 64, .growing_pages = true};
inline constexpr probe_geometry owned_geometry{
    .segment_bytes = std::size_t{1} << 20, .largest_page_slices = 64, .owned_pages = true};
inline constexpr probe_geometry chunks_geometry{.chunk_pages = true, .release_empty_heads = true};
inline constexpr probe_geometry owned_chunks_geometry{
    .owned_pages = true, .chunk_pages = true, .release_empty_heads = true};
inline constexpr probe_geometry owned_lean_geometry{.owned_pages = true,
                                                    .release_empty_heads = true};
inline constexpr probe_geometry owned_spans_geometry{
    .owned_pages = true, .chunk_pages = true, .release_empty_heads = true, .span_chunks = 4};

using sharded_pages_probe = basic_sharded_pages_probe<first_geometry>;
using sharded_pages_probe_1m = basic_sharded_pages_probe<geometry_1m>;
using sharded_pages_probe_grow = basic_sharded_pages_probe<grow_geometry>;
using sharded_pages_probe_owned = basic_sharded_pages_probe<owned_geometry>;
using sharded_pages_probe_chunks = basic_sharded_pages_probe<chunks_geometry>;
using sharded_pages_probe_owned_chunks = basic_sharded_pages_probe<owned_chunks_geometry>;
using sharded_pages_probe_owned_lean = basic_sharded_pages_probe<owned_lean_geometry>;
using sharded_pages_probe_owned_spans = basic_sharded_pages_probe<owned_spans_geometry>;

}  // namespace pmrkit::bench
