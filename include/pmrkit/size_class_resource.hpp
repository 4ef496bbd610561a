// pmrkit/size_class_resource.hpp — pmrkit's own size-class pool.
//
// Requests up to max_pooled bytes are rounded up to one of ~66 size classes (8, 16, then steps
// of 16 up to 128, four classes per power of two up to 2 KiB, eight above; those up to 4 KiB
// widened to fill their chunks, and 4080 beside 4096) and served from chunks that the resource
// takes from `upstream`, one chunk per class at a time. Larger requests, and alignments a class
// cannot provide, go straight to upstream and straight back on free. A request shaped as a chunk (a
// power of two from 8 KiB to 512 KiB, aligned to its size: what a pool over this one asks it
// for) takes a whole chunk, so request arenas over a long-lived size_class share its memory
// chunk by chunk.
// Chunks whose blocks are all free go back to upstream once more than max_retained bytes sit
// in such chunks (idle_retained once every thread is idle), or when the resource would
// otherwise hold more than it ever has for a chunk of another size; release() and the
// destructor return everything, whatever is still allocated. docs/size_class.md describes the
// design.
//
// Thread-safety: size_class_resource may be used from any threads at once, and a block may be
// freed on a thread other than the one that allocated it. Each thread keeps a small cache per
// resource, so the common allocate/free takes no lock. The caches of all threads together stay
// within max_cached_total (each may always have 16 KiB); a thread that exits gives its cache
// back, and so does one idle for cache_idle_time (taken by another thread, or by the
// resource's sweeper thread: see sweeper_thread); trim() takes every thread's cache back
// (parked threads' included); destroying the resource while other threads still hold cached
// blocks is safe (those threads simply forget them).
// size_class_unsync_resource is the same engine without atomics or locks: one thread at a time.
// Ownership: upstream is borrowed and must outlive the resource (and, for the synchronized
// resource, be safe to call from several threads). The resource is neither copyable nor
// movable; release() and destruction must not run concurrently with other calls on it.
#pragma once

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <memory_resource>
#include <vector>

namespace pmrkit {

struct size_class_options {
  // Largest pooled request; a power of two from 8 B to 1 MiB. Larger ones go to upstream.
  std::size_t max_pooled = 64 * 1024;
  // Bytes of a chunk, a power of two from 4 KiB to 256 MiB. A small class gets chunks of about
  // 128 blocks (at least 4 KiB, at most this), so a class in light use holds little. A class
  // of more than an eighth of this gets the smallest power of two from this up that its blocks
  // fill to seven eighths (a power-of-two class loses its last block to the chunk's header:
  // seven of eight), so one block of a large class holds about its own size, not eight blocks'
  // worth. Chunks are requested aligned to their size.
  std::size_t chunk_size = 64 * 1024;
  // Bytes the resource may keep in chunks whose blocks are all free (any class with the same
  // chunk size reuses them); beyond it such chunks go back to upstream as soon as they empty.
  // 0 returns every empty chunk at once. The default lets a service whose requests or phases
  // build and free up to 16 MiB reuse it without a round trip to upstream: at 4 MiB a document
  // tree of 7 MiB, built and freed again and again, gave 3 MiB of chunks back to the C heap
  // after each destroy and took them again, faulting their pages in (its destroys 5-9% and
  // builds 3-5% slower; docs/size_class.md, "Memory kept between bursts"). Kept chunks of one
  // size also go back when a chunk of another size would raise the most the resource has ever
  // held: the high-water mark follows what is live, not the sum of every size's peak. What is
  // kept is memory the resource already needed at its peak, and idle_retained bounds what an
  // idle resource keeps.
  std::size_t max_retained = 16 * 1024 * 1024;
  // Bytes of empty chunks an idle resource keeps (sync only): when a sweep has taken back every
  // thread's cache as idle (cache_idle_time), the empty chunks beyond this go back to upstream,
  // so that what max_retained keeps for the next burst of a busy resource does not stay with a
  // parked one. A resource used by one thread, or with the sweeps off (cache_idle_time 0, or
  // no sweeper_thread), keeps up to max_retained until trim().
  std::size_t idle_retained = 4 * 1024 * 1024;
  // Free bytes each thread may cache per resource, at most 1 GiB, shared among the classes as
  // the thread uses them (0 turns the caches off: every call then locks the shared store of
  // its class).
  // A class the thread stops using gives its cached blocks back over its next few thousand
  // allocations of other classes that take the cache's slow path (a refill), so its chunks can
  // empty; a thread whose allocations all come from its cache keeps them until an idle sweep
  // takes its cache (two threads or more) or trim().
  std::size_t thread_cache = 2 * 1024 * 1024;
  // Free bytes all threads' caches of this resource may hold together (sync only). Each cache
  // grows to its share, max_cached_total / caches, or thread_cache if smaller, and never below
  // 16 KiB (or thread_cache); a cache over its share (more threads came) shrinks to it at its
  // next slow path. Caches of idle threads are taken back (cache_idle_time), so the budget
  // goes to the threads that use it. The default gives sixteen threads their whole
  // thread_cache and 64 threads 512 KiB each: sixteen busy threads on mixed sizes, on sixteen
  // cores, ran 7x faster than with 512 KiB each (docs/size_class.md, "Many threads"). It is
  // per resource: a process with several resources may cache this much in each.
  std::size_t max_cached_total = 32 * 1024 * 1024;
  // A thread that neither allocates from this resource nor takes a slow path (an overflow of
  // its cache) for this long is idle: the next sweep gives its cached blocks back to the shared
  // stores, and empty chunks go on to upstream (sync only). Sweeps run at most once per this
  // time, on the slow path of a thread that uses the resource or on the sweeper thread (next);
  // a thread whose cache was taken makes a new one at its next call. Zero: never (a cache then
  // goes back only when its thread exits, or at trim()); at most ten minutes.
  std::chrono::microseconds cache_idle_time{1000};
  // A thread of the resource's own that sweeps for idle caches every cache_idle_time, so that the
  // caches of threads that all park at once go back too (sync only). It starts when a second thread
  // makes a cache of this resource, sleeps while no thread has one and the empty chunks are within
  // idle_retained, and is joined by the destructor. None starts with cache_idle_time 0, where the
  // kernel refuses membarrier (see trim()), or when the system refuses a thread. Without it, sweeps
  // ride on the slow paths of the threads that use the resource, so when every thread parks within
  // a cache_idle_time or two, the last ones keep their caches until a thread works again or trim()
  // runs. A process that forks has the thread in the parent only: destroy such a resource in the
  // parent (or exec). false: never start one.
  bool sweeper_thread = true;
};

// A snapshot. Exact when no other thread is using the resource; otherwise each field is
// recent but fields need not agree with each other.
struct size_class_stats {
  struct size_class {
    std::size_t block_size = 0;
    std::size_t chunk_bytes = 0;        // bytes of one chunk of this class
    std::size_t blocks_per_chunk = 0;   // at least (chunks differ by a block or two)
    std::uint64_t chunk_blocks = 0;     // blocks of the class's chunks: live + cached + free
    std::uint64_t allocations = 0;      // blocks handed out (since construction or release())
    std::uint64_t deallocations = 0;    // blocks given back
    std::uint64_t live_blocks = 0;      // handed out and not yet given back
    std::uint64_t cached_blocks = 0;    // free, in threads' caches
    std::uint64_t free_blocks = 0;      // free, in the shared store (including never-used ones)
    std::uint64_t chunks = 0;           // chunks of this class held from upstream
  };
  std::vector<size_class> classes;        // smallest first, up to max_pooled
  // Whole chunks, one entry a size from 8 KiB to 512 KiB: requests of a power of two aligned to
  // its size (what a pool over this one asks for its chunks), each served by a whole chunk,
  // cached by the thread that freed it like a block of a class and behind that kept among the
  // empty chunks (empty_chunk_bytes). block_size and chunk_bytes are the size; chunks (and
  // chunk_blocks) count those out of the empty chunks, with callers or cached.
  std::vector<size_class> whole_chunks;
  std::uint64_t large_allocations = 0;    // requests that went straight to upstream
  std::uint64_t large_deallocations = 0;
  std::uint64_t large_live_blocks = 0;
  // deallocate() calls with a large block or a whole chunk this resource does not hold (never
  // allocated here, freed twice, or freed after release()): a caller's bug, ignored and
  // counted here (debug builds also assert). A whole chunk is checked when its thread's cache
  // gives it back, not at the call: until then the cache may hand it out again, so such a
  // chunk can reach a caller (one freed twice, two) before it is counted, as a block of a
  // class can. Only a large block is checked at the call.
  std::uint64_t large_unknown_deallocations = 0;
  // Held now: chunks, large blocks and their table, the caches' slots.
  std::uint64_t bytes_from_upstream = 0;
  std::uint64_t peak_bytes_from_upstream = 0;  // high-water mark of bytes_from_upstream
  std::uint64_t empty_chunk_bytes = 0;         // held in chunks whose blocks are all free
  std::uint64_t cached_bytes = 0;              // free, in caches (the sum of the next)
  std::vector<std::uint64_t> thread_cached_bytes;  // per cache (sync: per thread), in no order
  // The caches' limits added up: what they may hold at most, within max_cached_total.
  std::uint64_t cache_limit_bytes = 0;
  // Of bytes_from_upstream: the caches' stacks of free blocks' addresses (8 bytes a block of a
  // class's limit and two more words, 128 at least, for each class a cache uses). Each cache
  // itself, about 4.6 KiB a thread and resource, comes from the process heap and is in no
  // figure here.
  std::uint64_t cache_slot_bytes = 0;
};

// Policies of the engine: sync_policy (per-thread caches, a mutex per class) and
// unsync_policy (one cache, no atomics, no locks).
struct sync_policy {};
struct unsync_policy {};

namespace detail {
template <class Policy>
class size_class_engine;
}

template <class Policy>
class basic_size_class_resource final : public std::pmr::memory_resource {
 public:
  // Throws std::invalid_argument if an option is out of range (the message says what is
  // allowed) or upstream is null.
  explicit basic_size_class_resource(
      size_class_options options = {},
      std::pmr::memory_resource* upstream = std::pmr::get_default_resource());
  ~basic_size_class_resource() override;
  basic_size_class_resource(const basic_size_class_resource&) = delete;
  basic_size_class_resource& operator=(const basic_size_class_resource&) = delete;

  // Returns every byte taken from upstream, including blocks still allocated (which become
  // invalid), and empties every thread's cache of this resource. Counters restart at zero,
  // except the peak.
  void release();

  // Gives every thread's cached blocks of this resource back to the shared stores, parked
  // threads' included, and returns every empty chunk to upstream, whatever max_retained allows:
  // call it after a phase that freed most of what it allocated. Afterwards the resource holds
  // only chunks with a live block in them (and large blocks still allocated). Safe to call
  // while other threads use the resource: a thread's cache is taken while that thread may be
  // in the middle of a call (a process-wide barrier, Linux membarrier, orders it; the threads
  // pay two plain stores per call for it), and each thread makes a new cache at its next call.
  // Where the kernel refuses membarrier (before Linux 4.14, or a seccomp filter), only the
  // calling thread's cache is given back. Waits for calls in progress on other threads, and
  // for a sweep for idle caches in progress (its chunks are freed too), so it must not be
  // called from inside this resource's upstream.
  void trim() noexcept;

  // A snapshot. While other threads run, counts may be a call or two apart, but a cache that a
  // thread's exit or a sweep gives back is counted once: in the cache, or in the stores.
  size_class_stats stats() const;
  const size_class_options& options() const noexcept;
  std::pmr::memory_resource* upstream_resource() const noexcept;

 private:
  void* do_allocate(std::size_t bytes, std::size_t alignment) override;
  void do_deallocate(void* p, std::size_t bytes, std::size_t alignment) override;
  bool do_is_equal(const std::pmr::memory_resource& other) const noexcept override {
    return this == &other;
  }

  std::unique_ptr<detail::size_class_engine<Policy>> engine_;
};

extern template class basic_size_class_resource<sync_policy>;
extern template class basic_size_class_resource<unsync_policy>;

using size_class_resource = basic_size_class_resource<sync_policy>;
using size_class_unsync_resource = basic_size_class_resource<unsync_policy>;

}  // namespace pmrkit
