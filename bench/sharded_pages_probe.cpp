#include "sharded_pages_probe.hpp"

#include <algorithm>
#include <bit>
#include <memory>
#include <mutex>
#include <new>
#include <thread>
#include <utility>

namespace pmrkit::bench {

template <probe_geometry G>
basic_sharded_pages_probe<G>::basic_sharded_pages_probe(std::pmr::memory_resource* upstream)
    : upstream_(upstream) {
  std::size_t sizes[class_count];
  unsigned n = 0;
  for (std::size_t s = 16; s <= 128; s += 16) sizes[n++] = s;
  for (std::size_t base = 128; base < largest_pooled; base *= 2)
    for (std::size_t step = 1; step <= 4; ++step) sizes[n++] = base + step * base / 4;
  unsigned c = 0;
  for (std::size_t i = 0; i < class_of_.size(); ++i) {
    while (sizes[c] < i * 16) ++c;
    class_of_[i] = static_cast<std::uint8_t>(c);
  }
  for (unsigned i = 0; i < class_count; ++i) {
    class_size_[i] = static_cast<std::uint32_t>(sizes[i]);
    const std::size_t bytes = std::clamp<std::size_t>(std::bit_ceil(128 * sizes[i]), slice_bytes,
                                                      largest_page_slices * slice_bytes);
    class_slices_[i] = static_cast<std::uint8_t>(bytes / slice_bytes);
    // Growing: the first page holds one block (one slice at least), each next one twice as many
    // slices, up to the class's most.
    next_slices_[i] = static_cast<std::uint8_t>(std::min<std::size_t>(
        std::bit_ceil((sizes[i] + slice_bytes - 1) / slice_bytes), class_slices_[i]));
  }
}

template <probe_geometry G>
basic_sharded_pages_probe<G>::~basic_sharded_pages_probe() {
  // The threads' references to the heaps go first (thread_heaps_, destroyed after this body,
  // then only finds them detached).
  if constexpr (owned_pages) thread_heaps_.detach_all();
  while (heaps_) delete std::exchange(heaps_, heaps_->next_heap);
  if constexpr (chunk_pages)
    while (spans_) free_span(spans_);
  while (segments_) {
    segment* const next = segments_->next_segment;
    segments_->~segment();
    upstream_->deallocate(segments_, segment_bytes, segment_bytes);
    segments_ = next;
  }
}

template <probe_geometry G>
void basic_sharded_pages_probe<G>::push_front(page_queue& q, page* pg) noexcept {
  pg->prev = nullptr;
  pg->next = q.head;
  (q.head ? q.head->prev : q.tail) = pg;
  q.head = pg;
  pg->queued = true;
}

template <probe_geometry G>
void basic_sharded_pages_probe<G>::push_back(page_queue& q, page* pg) noexcept {
  pg->next = nullptr;
  pg->prev = q.tail;
  (q.tail ? q.tail->next : q.head) = pg;
  q.tail = pg;
  pg->queued = true;
}

template <probe_geometry G>
void basic_sharded_pages_probe<G>::remove(page_queue& q, page* pg) noexcept {
  (pg->prev ? pg->prev->next : q.head) = pg->next;
  (pg->next ? pg->next->prev : q.tail) = pg->prev;
  pg->prev = pg->next = nullptr;
  pg->queued = false;
}

// Whether slices first..first+k-1 (k <= 64) are all free; a run may span two words.
template <probe_geometry G>
bool basic_sharded_pages_probe<G>::slices_free(const segment& seg, unsigned first,
                                               unsigned k) noexcept {
  const unsigned word = first / 64, shift = first % 64;
  std::uint64_t bits = seg.free_slices[word] >> shift;
  if (shift != 0 && shift + k > 64) bits |= seg.free_slices[word + 1] << (64 - shift);
  return (bits & run_of(k)) == run_of(k);
}

template <probe_geometry G>
void basic_sharded_pages_probe<G>::mark_slices(segment& seg, unsigned first, unsigned k,
                                               bool free) noexcept {
  const unsigned word = first / 64, shift = first % 64;
  const std::uint64_t run = run_of(k);
  const std::uint64_t low = run << shift;
  const std::uint64_t high = shift != 0 && shift + k > 64 ? run >> (64 - shift) : 0;
  if (free) {
    seg.free_slices[word] |= low;
    if (high) seg.free_slices[word + 1] |= high;
  } else {
    seg.free_slices[word] &= ~low;
    if (high) seg.free_slices[word + 1] &= ~high;
  }
}

// The lowest free run of the page's slice count in a segment, above the segment's header
// (fixed pages: aligned to their length, so that a free finds the page with a mask; growing
// pages: anywhere, found through the slices' offsets), else a new segment.
template <probe_geometry G>
auto basic_sharded_pages_probe<G>::new_page(heap& h, unsigned c) -> page* {
  const std::lock_guard lock(segments_mutex_);
  if constexpr (chunk_pages) {
    const unsigned k = class_slices_[c];
    const std::size_t bytes = k * slice_bytes;
    chunk* const ch = take_chunk(h, c, k);
    // Blocks at multiples of their size from the chunk's start, past the descriptor.
    const std::uint32_t size = class_size_[c];
    auto* const start = reinterpret_cast<std::byte*>(ch);
    return format(&ch->pg, c, k, start + (sizeof(chunk) + size - 1) / size * size, start + bytes);
  }
  const unsigned k = growing_pages ? next_slices_[c] : class_slices_[c];
  if constexpr (growing_pages)
    next_slices_[c] = static_cast<std::uint8_t>(std::min<unsigned>(2 * k, class_slices_[c]));
  const unsigned step = growing_pages ? 1 : k;
  const auto lowest =
      static_cast<unsigned>(growing_pages ? header_slices : (header_slices + k - 1) / k * k);
  // Twice with release_empty_heads: the second time after other classes' emptied current pages
  // gave their slices back, before a new segment would raise memory held.
  for (int pass = 0; pass < (release_empty_heads ? 2 : 1); ++pass) {
    if (pass == 1) {
      if (!(h.empty_heads & ~(std::uint64_t{1} << c))) break;
      release_noted_heads(h, c);
    }
    for (segment* seg = segments_; seg; seg = seg->next_segment)
      for (unsigned first = lowest; first + k <= slices_per_segment; first += step)
        if (slices_free(*seg, first, k)) {
          mark_slices(*seg, first, k, false);
          return format(&seg->pages[first], c, k);
        }
  }
  auto* const seg = new (upstream_->allocate(segment_bytes, segment_bytes)) segment{};
  for (std::uint64_t& word : seg->free_slices) word = ~std::uint64_t{0};
  for (unsigned s = 0; s < header_slices; ++s) mark_slices(*seg, s, 1, false);
  seg->next_segment = segments_;
  segments_ = seg;
  mark_slices(*seg, lowest, k, false);
  return format(&seg->pages[lowest], c, k);
}

template <probe_geometry G>
auto basic_sharded_pages_probe<G>::format(page* pg, unsigned c, unsigned k) noexcept -> page* {
  segment* const seg = segment_of(pg);
  const auto first = static_cast<std::size_t>(pg - seg->pages.data());
  if constexpr (growing_pages)
    for (unsigned i = 1; i < k; ++i) seg->pages[first + i].offset = static_cast<std::uint8_t>(i);
  std::byte* const start = reinterpret_cast<std::byte*>(seg) + first * slice_bytes;
  return format(pg, c, k, start, start + k * slice_bytes);
}

template <probe_geometry G>
auto basic_sharded_pages_probe<G>::format(page* pg, unsigned c, unsigned k, std::byte* first,
                                          std::byte* end) noexcept -> page* {
  const std::uint32_t size = class_size_[c];
  std::destroy_at(pg);
  std::construct_at(pg);
  pg->size_class = static_cast<std::uint8_t>(c);
  pg->slices = static_cast<std::uint8_t>(k);
  pg->unthreaded = first;
  pg->never_used = static_cast<std::uint16_t>((end - first) / size);
  return pg;
}

template <probe_geometry G>
void* basic_sharded_pages_probe<G>::allocate_large(std::size_t bytes, std::size_t alignment) {
  if constexpr (chunk_pages) {
    heap& h = current_heap();
    const std::lock_guard lock(segments_mutex_);
    make_room(h, class_count, bytes);
    void* const p = upstream_->allocate(bytes, alignment);
    held_ += bytes;
    peak_held_ = std::max(peak_held_, held_);
    return p;
  }
  return upstream_->allocate(bytes, alignment);
}

template <probe_geometry G>
void basic_sharded_pages_probe<G>::deallocate_large(void* p, std::size_t bytes,
                                                    std::size_t alignment) noexcept {
  if constexpr (chunk_pages) {
    const std::lock_guard lock(segments_mutex_);
    held_ -= bytes;
  }
  upstream_->deallocate(p, bytes, alignment);
}

template <probe_geometry G>
auto basic_sharded_pages_probe<G>::current_heap() -> heap& {
  if constexpr (owned_pages) {
    if (heap* const h = thread_heaps_.find(this)) return *h;
    return adopt_or_make_heap();
  } else {
    return own_heap_;
  }
}

template <probe_geometry G>
auto basic_sharded_pages_probe<G>::adopt_or_make_heap() -> heap& {
  if constexpr (owned_pages) {
    // The spare is an abandoned heap if there is one (its pages come to this thread, and the
    // emptied heap serves as the spare, so heaps do not pile up as threads come and go), else a
    // new one, made before the thread's heap so that nothing is left half done if it throws.
    heap* spare = nullptr;
    {
      const std::lock_guard lock(segments_mutex_);
      if ((spare = abandoned_)) abandoned_ = spare->next_abandoned;
    }
    if (!spare) {
      spare = new heap{};
      const std::lock_guard lock(segments_mutex_);
      spare->next_heap = heaps_;
      heaps_ = spare;
    }
    heap* const h = thread_heaps_.make(this);
    const std::lock_guard lock(segments_mutex_);
    if (!h) {
      // The thread is past its exit hook: it cannot own a heap. The spare, and any pages in
      // it, wait for the next thread.
      spare->next_abandoned = abandoned_;
      abandoned_ = spare;
      throw std::bad_alloc();
    }
    // Under the lock that ordered the exiting owner's writes to the pages before these.
    move_pages(*spare, *h, &detail::this_thread_caches);
    h->spare = spare;
    return *h;
  } else {
    return own_heap_;
  }
}

template <probe_geometry G>
void basic_sharded_pages_probe<G>::move_pages(heap& from, heap& to, const void* thread) noexcept {
  for (unsigned c = 0; c < class_count; ++c) {
    for (page* pg = from.queues[c].head; pg; pg = pg->next) {
      pg->owner = &to;
      pg->thread.store(thread, std::memory_order_relaxed);
    }
    to.queues[c] = std::exchange(from.queues[c], page_queue{});
  }
}

template <probe_geometry G>
void basic_sharded_pages_probe<G>::absorb_exiting_cache(heap& h) noexcept {
  if constexpr (owned_pages) {
    // Take back each full page's mark. Where another thread's free took it first, that free
    // links the page into h.returned: wait until every such page is there, so that none is
    // still on its way into this heap when the heap goes.
    std::size_t on_their_way = 0;
    for (page* pg = h.full.head; pg; pg = pg->next) {
      std::uintptr_t marked = full_mark;
      if (!pg->thread_free.compare_exchange_strong(marked, 0, std::memory_order_acq_rel,
                                                   std::memory_order_relaxed))
        ++on_their_way;
    }
    while (on_their_way != 0) {
      if (page* const list = h.returned.exchange(nullptr, std::memory_order_acquire))
        on_their_way -= take_returned(h, list);
      else
        std::this_thread::yield();
    }
    // The full pages left, unmarked, join their queues: the adopter finds them dry and marks
    // them again. Then every page with no block out goes back, and the rest move to the spare.
    while (page* const pg = h.full.head) {
      remove(h.full, pg);
      push_back(h.queues[pg->size_class], pg);
    }
    for (page_queue& q : h.queues)
      for (page* pg = q.head; pg;) {
        page* const next = pg->next;
        collect(pg);
        if (pg->used == 0) {
          remove(q, pg);
          release_page(pg);
        }
        pg = next;
      }
    move_pages(h, *h.spare, nullptr);
    const std::lock_guard lock(segments_mutex_);
    h.spare->next_abandoned = abandoned_;
    abandoned_ = h.spare;
  }
}

template <probe_geometry G>
void basic_sharded_pages_probe<G>::free_from_other_thread(page* pg, void* p) noexcept {
  std::uintptr_t seen = pg->thread_free.load(std::memory_order_relaxed);
  do {
    *static_cast<void**>(p) = reinterpret_cast<void*>(seen & ~full_mark);
  } while (!pg->thread_free.compare_exchange_weak(seen, reinterpret_cast<std::uintptr_t>(p),
                                                  std::memory_order_acq_rel,
                                                  std::memory_order_relaxed));
  if (!(seen & full_mark)) return;
  // This free took the mark: the page, out of its queue, is this thread's to link (acquire
  // above: after the owner's last write to its links).
  heap* const owner = pg->owner;
  page* head = owner->returned.load(std::memory_order_relaxed);
  do {
    pg->next_returned = head;
  } while (!owner->returned.compare_exchange_weak(head, pg, std::memory_order_release,
                                                  std::memory_order_relaxed));
}

template <probe_geometry G>
void basic_sharded_pages_probe<G>::collect(page* pg) noexcept {
  if (pg->thread_free.load(std::memory_order_relaxed) == 0) return;
  // No full_mark here: a page carries it only while full and out of every list.
  void* const first =
      reinterpret_cast<void*>(pg->thread_free.exchange(0, std::memory_order_acquire));
  void* last = first;
  std::uint32_t count = 1;
  for (void* next; (next = *static_cast<void**>(last)) != nullptr; last = next) ++count;
  *static_cast<void**>(last) = pg->free;
  pg->free = first;
  pg->used -= count;
}

template <probe_geometry G>
std::size_t basic_sharded_pages_probe<G>::take_returned(heap& h, page* list) noexcept {
  std::size_t count = 0;
  for (page* pg = list; pg; ++count) {
    page* const next = pg->next_returned;
    remove(h.full, pg);
    collect(pg);
    if (pg->used != 0)
      push_back(h.queues[pg->size_class], pg);
    else
      release_page(pg);
    pg = next;
  }
  return count;
}

template <probe_geometry G>
void* basic_sharded_pages_probe<G>::allocate_slow(unsigned c) {
  heap& h = current_heap();
  if constexpr (owned_pages)
    if (h.returned.load(std::memory_order_relaxed))
      take_returned(h, h.returned.exchange(nullptr, std::memory_order_acquire));
  page_queue& q = h.queues[c];
  for (;;) {
    page* pg = q.head;
    if (!pg) {
      pg = new_page(h, c);
      pg->owner = &h;
      if constexpr (owned_pages)
        pg->thread.store(&detail::this_thread_caches, std::memory_order_relaxed);
      push_front(q, pg);
    }
    // Blocks other threads freed first, then never-used ones.
    if constexpr (owned_pages)
      if (!pg->free) collect(pg);
    if (!pg->free && pg->never_used != 0) {
      // Thread the next 4 KiB of never-used blocks, lowest address first, as mimalloc extends
      // a page: a fresh page is touched as it fills, not all at once.
      const std::uint32_t size = class_size_[c];
      const auto count = static_cast<std::uint16_t>(
          std::min<std::uint32_t>(pg->never_used, std::max<std::uint32_t>(1, 4096 / size)));
      std::byte* block = pg->unthreaded;
      for (std::size_t i = 1; i < count; ++i, block += size)
        *reinterpret_cast<void**>(block) = block + size;
      *reinterpret_cast<void**>(block) = nullptr;
      pg->free = pg->unthreaded;
      pg->unthreaded = block + size;
      pg->never_used -= count;
    }
    if (void* const block = pg->free) {
      pg->free = *static_cast<void**>(block);
      ++pg->used;
      return block;
    }
    remove(q, pg);  // full: rejoins the queue when a block comes back
    if constexpr (owned_pages) {
      // Marked only once out of the queue: the free that takes the mark links the page into
      // the heap's returned list. A block freed meanwhile on another thread fails the mark.
      std::uintptr_t none = 0;
      if (pg->thread_free.compare_exchange_strong(none, full_mark, std::memory_order_acq_rel,
                                                  std::memory_order_relaxed)) {
        push_back(h.full, pg);
        pg->queued = false;
      } else {
        push_front(q, pg);
      }
    }
  }
}

template <probe_geometry G>
void basic_sharded_pages_probe<G>::after_free_slow(page* pg) noexcept {
  page_queue& q = pg->owner->queues[pg->size_class];
  if constexpr (owned_pages) {
    // Full: taking its mark back takes the page back, unless another thread's free took it
    // first and linked the page into the returned list.
    std::uintptr_t marked = full_mark;
    if (!pg->queued) {
      if (!pg->thread_free.compare_exchange_strong(marked, 0, std::memory_order_acq_rel,
                                                   std::memory_order_relaxed))
        return;
      remove(pg->owner->full, pg);
    }
  }
  if (pg->used != 0) {
    push_back(q, pg);  // was full
    return;
  }
  if (pg->queued) {
    if (q.head == pg) {  // allocations come from it next
      if constexpr (release_empty_heads)
        pg->owner->empty_heads |= std::uint64_t{1} << pg->size_class;
      return;
    }
    remove(q, pg);
  }
  release_page(pg);
}

template <probe_geometry G>
void basic_sharded_pages_probe<G>::link(chunk*& head, chunk* span, chunk* chunk::*prev,
                                        chunk* chunk::*next) noexcept {
  span->*prev = nullptr;
  span->*next = head;
  if (head) head->*prev = span;
  head = span;
}

template <probe_geometry G>
void basic_sharded_pages_probe<G>::unlink(chunk*& head, chunk* span, chunk* chunk::*prev,
                                          chunk* chunk::*next) noexcept {
  (span->*prev ? span->*prev->*next : head) = span->*next;
  if (span->*next) span->*next->*prev = span->*prev;
  span->*prev = span->*next = nullptr;
}

template <probe_geometry G>
auto basic_sharded_pages_probe<G>::take_chunk(heap& h, unsigned c, unsigned k) -> chunk* {
  const std::size_t bytes = k * slice_bytes;
  if (!room_[k] && !empty_spans_[k]) make_room(h, c, bytes);
  chunk* span = room_[k];
  if (!span && (span = empty_spans_[k])) {
    empty_spans_[k] = span->next_room;
    empty_bytes_ -= span->chunks * bytes;
    link(room_[k], span, &chunk::prev_room, &chunk::next_room);
  }
  if (!span) {
    // Spans of a size start at one chunk and double, up to span_chunks: a size with a few
    // pages in use holds no more than those.
    const unsigned n = std::max<unsigned>(1, next_span_chunks_[k]);
    next_span_chunks_[k] = static_cast<std::uint8_t>(std::min(2 * n, G.span_chunks));
    auto* const base = static_cast<std::byte*>(upstream_->allocate(n * bytes, bytes));
    held_ += n * bytes;
    peak_held_ = std::max(peak_held_, held_);
    span = new (base) chunk{};
    span->chunks = n;
    span->slices = static_cast<std::uint8_t>(k);
    span->free_chunks = run_of(n);
    for (unsigned i = 0; i < n; ++i) {
      auto* const each = i == 0 ? span : new (base + i * bytes) chunk{};
      each->span = span;
    }
    link(spans_, span, &chunk::prev_span, &chunk::next_span);
    link(room_[k], span, &chunk::prev_room, &chunk::next_room);
  }
  // The lowest free chunk: a size's pages fill a span from its start.
  const auto i = static_cast<unsigned>(std::countr_zero(span->free_chunks));
  span->free_chunks &= span->free_chunks - 1;
  if (span->free_chunks == 0) unlink(room_[k], span, &chunk::prev_room, &chunk::next_room);
  return reinterpret_cast<chunk*>(reinterpret_cast<std::byte*>(span) + i * bytes);
}

template <probe_geometry G>
void basic_sharded_pages_probe<G>::make_room(heap& h, unsigned c, std::size_t bytes) noexcept {
  if (held_ + bytes <= peak_held_) return;
  release_noted_heads(h, c);
  if (c < class_count && (room_[class_slices_[c]] || empty_spans_[class_slices_[c]])) return;
  for (unsigned size = largest_page_slices; size > 0 && held_ + bytes > peak_held_; --size)
    while (empty_spans_[size] && held_ + bytes > peak_held_) {
      chunk* const e = empty_spans_[size];
      empty_spans_[size] = e->next_room;
      empty_bytes_ -= e->chunks * size * slice_bytes;
      e->next_room = nullptr;
      free_span(e);
    }
}

template <probe_geometry G>
void basic_sharded_pages_probe<G>::free_span(chunk* span) noexcept {
  unlink(spans_, span, &chunk::prev_span, &chunk::next_span);
  const std::size_t bytes = span->slices * slice_bytes;
  held_ -= span->chunks * bytes;
  upstream_->deallocate(span, span->chunks * bytes, bytes);
}

template <probe_geometry G>
void basic_sharded_pages_probe<G>::keep_or_free(chunk* ch) noexcept {
  chunk* const span = ch->span;
  const unsigned k = span->slices;
  const std::size_t bytes = k * slice_bytes;
  const auto i = static_cast<unsigned>(
      (reinterpret_cast<std::byte*>(ch) - reinterpret_cast<std::byte*>(span)) / bytes);
  if (span->free_chunks == 0) link(room_[k], span, &chunk::prev_room, &chunk::next_room);
  span->free_chunks |= std::uint64_t{1} << i;
  if (span->free_chunks != run_of(span->chunks)) return;
  unlink(room_[k], span, &chunk::prev_room, &chunk::next_room);
  if (empty_bytes_ + span->chunks * bytes <= max_kept_bytes) {
    span->next_room = empty_spans_[k];
    empty_spans_[k] = span;
    empty_bytes_ += span->chunks * bytes;
  } else {
    free_span(span);
  }
}

template <probe_geometry G>
void basic_sharded_pages_probe<G>::release_noted_heads(heap& h, unsigned c) noexcept {
  for (std::uint64_t heads = h.empty_heads & ~(std::uint64_t{1} << c); heads; heads &= heads - 1) {
    page_queue& q = h.queues[std::countr_zero(heads)];
    page* const e = q.head;
    if (e && e->used == 0) {
      remove(q, e);
      release_page_locked(e);
    }
  }
  h.empty_heads &= std::uint64_t{1} << c;
}

template <probe_geometry G>
void basic_sharded_pages_probe<G>::release_page(page* pg) noexcept {
  const std::lock_guard lock(segments_mutex_);
  release_page_locked(pg);
}

// Its slices go back to the segment, for the next page of any size.
template <probe_geometry G>
void basic_sharded_pages_probe<G>::release_page_locked(page* pg) noexcept {
  if constexpr (chunk_pages) {
    keep_or_free(reinterpret_cast<chunk*>(pg));
    return;
  }
  segment* const seg = segment_of(pg);
  const auto first = static_cast<unsigned>(pg - seg->pages.data());
  mark_slices(*seg, first, pg->slices, true);
}

template class basic_sharded_pages_probe<first_geometry>;
template class basic_sharded_pages_probe<geometry_1m>;
template class basic_sharded_pages_probe<grow_geometry>;
template class basic_sharded_pages_probe<owned_geometry>;
template class basic_sharded_pages_probe<chunks_geometry>;
template class basic_sharded_pages_probe<owned_chunks_geometry>;
template class basic_sharded_pages_probe<owned_lean_geometry>;
template class basic_sharded_pages_probe<owned_spans_geometry>;

}  // namespace pmrkit::bench
