// Internal: the engine behind basic_size_class_resource<Policy>.
//
// Three layers: a cache holding a stack of free blocks' addresses per class (one cache per
// thread and resource under sync_policy, found through a thread-local one-entry check; the
// resource's own under unsync_policy); a shared store per class that caches refill from and
// overflow into in batches; upstream, for chunks and for large requests. allocate() and
// deallocate() below are the fast paths; everything they call on a miss lives in
// size_class_engine.cpp.
#pragma once

#include <algorithm>
#include <array>
#include <atomic>
#include <bit>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <memory_resource>
#include <new>
#include <type_traits>
#include <utility>

#include "idle_sweeper.hpp"
#include "pmrkit/size_class_resource.hpp"
#include "size_class_cache.hpp"
#include "size_class_empty_chunks.hpp"
#include "size_class_idle_grace.hpp"
#include "size_class_large_blocks.hpp"
#include "size_class_policy.hpp"
#include "size_class_store.hpp"
#include "size_class_table.hpp"
#include "thread_cache_directory.hpp"

namespace pmrkit::detail {

template <class Policy>
class size_class_engine {
  using traits = policy_traits<Policy>;
  // The same names as the templates: one name for each level.
  using size_class_cache =
      detail::size_class_cache<traits::template counter, typename traits::sequence_lock>;
  using block_stack = detail::block_stack<traits::template counter>;
  static constexpr bool per_thread_caches = traits::per_thread_caches;

 public:
  // Throws std::invalid_argument for an option out of range or a null upstream. `key` is the
  // address of the resource that owns the engine (its caches are found by it: allocate()).
  size_class_engine(const size_class_options& options, std::pmr::memory_resource* upstream,
                    const void* key);
  ~size_class_engine();
  size_class_engine(const size_class_engine&) = delete;
  size_class_engine& operator=(const size_class_engine&) = delete;

  // The fast paths, called by the resource: `key` is the resource's address, `engine` its
  // pointer to this engine. They handle a request with a table-sized class and a cache hit;
  // everything else is a tail call into the slow paths, which recompute what they need. That
  // keeps them free of stack frames and saved registers. Under sync_policy a hit never loads
  // the engine's address: the size table is the program's (stack_offsets), and the thread's
  // cache is told from others by the resource's address, already in a register (one load
  // fewer a call: docs/size_class_containers.md, "The engine's address off the fast paths").
  // Each use of the thread's cache is bracketed (two plain stores of a thread-local flag), so
  // that trim() can take the caches of threads that are parked (thread_cache_directory.hpp).
  // Sizes past max_pooled find the stack of a class this engine does not pool, which never
  // has slots, so both fast paths fail on it and the slow paths send the size upstream.
  static void* allocate(const void* key, const std::unique_ptr<size_class_engine>& engine,
                        std::size_t bytes, std::size_t alignment) {
    const std::size_t size = bytes > alignment ? bytes : alignment;
    if (size <= table_limit && alignment <= 16) [[likely]] {
      const unsigned offset = stack_offsets[(size + 7) >> 3];
      void* block;
      if constexpr (per_thread_caches) {
        // A thread without a cache has no_cache_link() here, whose owner is never a key.
        cache_link* const link = this_thread_caches.last;
        begin_fast_use();
        if (link->owner.load(std::memory_order_relaxed) == key) [[likely]] {
          if (stack_at(thread_cache_set::cache_of(link), offset).try_pop(block)) [[likely]] {
            end_fast_use();
            return block;
          }
        }
        end_fast_use();
      } else {
        if (stack_at(engine->own_cache_, offset).try_pop(block)) [[likely]] return block;
      }
    }
    return engine->allocate_slow(bytes, alignment);
  }

  static void deallocate(const void* key, const std::unique_ptr<size_class_engine>& engine,
                         void* block, std::size_t bytes, std::size_t alignment) noexcept {
    const std::size_t size = bytes > alignment ? bytes : alignment;
    if (size <= table_limit && alignment <= 16) [[likely]] {
      const unsigned offset = stack_offsets[(size + 7) >> 3];
      if constexpr (per_thread_caches) {
        cache_link* const link = this_thread_caches.last;  // as in allocate()
        begin_fast_use();
        if (link->owner.load(std::memory_order_relaxed) == key) [[likely]] {
          size_class_cache& local = thread_cache_set::cache_of(link);
          if (stack_at(local, offset).try_push(block)) [[likely]] {
            end_fast_use();
            return;
          }
          if (index_of_stack(offset) < engine->class_count_) [[likely]]
            return engine->overflow_from_fast_use(*link, local, index_of_stack(offset), block);
        }
        end_fast_use();
      } else {
        size_class_engine& self = *engine;
        if (stack_at(self.own_cache_, offset).try_push(block)) [[likely]] return;
        if (index_of_stack(offset) < self.class_count_) [[likely]]
          return self.overflow(self.own_cache_, index_of_stack(offset), block);
      }
    }
    return engine->deallocate_slow(block, bytes, alignment);
  }

  void release() noexcept;
  void trim() noexcept;
  size_class_stats stats() const;
  const size_class_options& options() const noexcept { return options_; }
  std::pmr::memory_resource* upstream() const noexcept { return upstream_; }

 private:
  // A request shaped as a chunk, a power of two from 8 KiB to 512 KiB aligned to its size,
  // which is what a pool over this one asks for its own chunks (a request arena over a
  // long-lived size_class). It takes a whole chunk, through the thread's cache like a block of
  // a class (a stack per size, after the classes' stacks); behind the cache, chunks come from
  // the empty chunks kept or from upstream, and go back among the empty chunks (within
  // max_retained), where any class of that chunk size can take them. A class of such blocks
  // held seven of them a chunk (the header takes the eighth) and pinned a partly used chunk:
  // the pool of the bench's shared rows held 1.35-1.58x the live bytes, and holds 1.14-1.19x
  // with whole chunks (docs/size_class.md, "A resource per request").
  static constexpr bool is_whole_chunk(std::size_t bytes, std::size_t alignment) noexcept {
    return bytes == alignment && bytes >= smallest_whole_chunk && bytes <= largest_whole_chunk;
  }
  // Whole chunks' stacks come after every class's, whatever max_pooled is, so that the table's
  // classes past max_pooled name stacks without slots rather than theirs.
  static unsigned whole_chunk_index(std::size_t bytes) noexcept {
    return size_classes::count +
           static_cast<unsigned>(std::countr_zero(bytes / smallest_whole_chunk));
  }
  static bool is_whole_chunk_index(unsigned index) noexcept {
    return index >= size_classes::count;
  }

  // Requests of at most this many bytes (and alignment at most 16) find their class in one
  // table load; 4096 covers the sizes most programs allocate most often. Every class from 16
  // bytes up is a multiple of 16, so 16-byte alignment costs nothing.
  static constexpr std::size_t table_limit = 4096;
  // For each 8 bytes of request size up to table_limit (the size rounded up, over 8): where
  // its class's stack lies among a cache's stacks, the class's index times
  // sizeof(block_stack), so that a fast path addresses the stack without scaling an index (two
  // instructions fewer a call: docs/size_class_containers.md, "What a free costs in a
  // destroy"). index_of_stack() gives the class back. The same for every engine: a class
  // past max_pooled keeps a stack that never has slots.
  static constexpr auto stack_offsets = [] {
    std::array<std::uint16_t, table_limit / 8 + 1> offsets{};
    for (std::size_t slot = 0; slot < offsets.size(); ++slot) {
      const std::size_t size = std::max<std::size_t>(slot * 8, 1);
      const std::size_t offset = size_classes::index_of(size) * sizeof(block_stack);
      offsets[slot] = static_cast<std::uint16_t>(offset);
    }
    return offsets;
  }();

  using thread_cache_set = thread_caches<size_class_engine, size_class_cache>;
  friend thread_cache_set;

  // The stack at `offset` bytes into a cache's stacks (stack_offsets), and its class.
  static block_stack& stack_at(size_class_cache& cache, unsigned offset) noexcept {
    return *std::launder(reinterpret_cast<block_stack*>(
        reinterpret_cast<std::byte*>(cache.stacks.data()) + offset));
  }
  static unsigned index_of_stack(unsigned offset) noexcept {
    return offset / static_cast<unsigned>(sizeof(block_stack));
  }

  unsigned class_for(std::size_t bytes, std::size_t alignment) const noexcept;
  // The calling thread's cache, made on first use; nullptr if there can be none (out of
  // memory, or the thread is past its exit hook).
  size_class_cache* local_cache() noexcept;

  // Slow paths (size_class_engine.cpp).
  void* allocate_slow(std::size_t bytes, std::size_t alignment);
  void deallocate_slow(void* block, std::size_t bytes, std::size_t alignment) noexcept;
  void* allocate_from(size_class_cache& local, unsigned index);
  void deallocate_into(size_class_cache& local, void* block, unsigned index) noexcept;
  void* refill(size_class_cache& local, unsigned index);
  // A free of `block` found its class's stack at the limit: the block goes on top, then the
  // stack gives back down to half its limit (the block may be among what goes).
  void overflow(size_class_cache& local, unsigned index, void* block) noexcept;
  // deallocate()'s overflow, out of line so that the fast path needs no stack frame: takes the
  // use over from the thread's fast flag, overflows, ends the use.
  void overflow_from_fast_use(cache_link& link, size_class_cache& local, unsigned index,
                              void* block) noexcept;
  // Ends a use of the thread's cache, then runs the sweep for idle caches that the use claimed
  // (note_slow_path): a sweep waits for other threads' uses, so it never runs inside one.
  void end_use_and_sweep(cache_link& link, size_class_cache& local) noexcept;
  void grow_limit(size_class_cache& local, unsigned index) noexcept;
  // Gives the stack slots for `new_limit` blocks and a refill's one more, and its floor
  // (within `most` words), from upstream; false, changing nothing, if upstream refuses them.
  bool reserve_slots(size_class_cache& local, unsigned index, std::uint32_t new_limit,
                     std::uint32_t most) noexcept;
  // Returns the stack's slots to upstream: its limit fell to 0, or its cache is going.
  void drop_slots(size_class_cache& local, unsigned index) noexcept;
  void free_slots(void** slots, std::uint32_t capacity) noexcept;
  // Counts a slow path; now and then claims the next sweep for idle caches (sweep_due), which
  // the caller runs once its use of the cache has ended.
  void note_slow_path(size_class_cache& local) noexcept;
  // Once the thread has made scavenge_allocations allocations since the last scavenge: gives
  // back half the blocks and half the limit of each class it did not use in them, and starts
  // the next interval (size_class_engine.cpp).
  void scavenge(size_class_cache& local) noexcept;
  // Halves other classes' limits, round robin, until the cache's limits fit in `budget`,
  // flushing what they hold beyond their new limits. `keep` is left alone.
  void shrink_to(size_class_cache& local, std::size_t budget, unsigned keep) noexcept;
  // What this cache's limits may add up to now: thread_cache, or its share of
  // max_cached_total among the resource's caches if smaller, but never less than
  // guaranteed_cache_bytes (size_class_engine.cpp).
  std::size_t cache_budget(const size_class_cache& local) const noexcept;
  // Counts a caches' arrival (+1) or departure (-1), and recomputes their share. An arrival
  // starts the sweeper thread (the second cache) or wakes it (the first since none).
  void count_caches(int change) noexcept;
  // The sweeper thread's sweep (idle_sweeper.hpp): one for idle caches if no thread has swept
  // for sweeper_slack cache_idle_times; true while some thread still has a cache, or the
  // empty chunks exceed idle_retained.
  static bool sweep_from_sweeper(void* engine) noexcept;
  // True for the one caller (of those that find `since` nanoseconds passed since the last
  // sweep) that wins the next sweep.
  bool claim_sweep(std::uint64_t since) noexcept;
  // Takes back the caches of threads that neither allocated nor took a slow path since the
  // previous sweep, so that their blocks go back to the stores (and empty chunks upstream) and
  // their share of max_cached_total goes to the threads that still run; once no cache is left,
  // returns the empty chunks beyond idle_retained. Runs outside any use of the caller's own
  // cache: it waits for the uses of others.
  void reclaim_idle_caches() noexcept;
  void flush(size_class_cache& local, unsigned index, std::uint32_t count) noexcept;
  // A thread exits (called by thread_cache_set), or its cache is reclaimed: every block goes
  // back to the stores, and the cache's limits stop counting against max_cached_total.
  void absorb_exiting_cache(size_class_cache& local) noexcept;
  void* allocate_uncached(unsigned index);
  void deallocate_uncached(void* block, unsigned index) noexcept;
  // Writes what the store hands out to out[0..) (store.take) and returns how many: blocks of
  // `shard`'s chunks, else of a kept empty chunk, else of a chunk of a shard no cache uses,
  // else of a new chunk from upstream.
  std::uint32_t take(unsigned index, unsigned shard, std::uint32_t wanted, std::uint32_t most,
                     std::uint64_t allocations, void** out);
  void give(unsigned index, void* const* blocks, std::uint32_t count,
            std::uint64_t allocations) noexcept;
  // A chunk for class `index`, formatted for it: an empty one that any class gave up (null if
  // none of its size is kept), or a new one from upstream.
  chunk_header* kept_chunk(unsigned index) noexcept;
  chunk_header* new_class_chunk(unsigned index);
  // The start of a chunk of `chunk_bytes` from upstream, aligned to its size.
  std::byte* new_chunk(std::size_t chunk_bytes);
  // About to take `bytes` more from upstream: if that would raise the most this resource has
  // ever held, kept empty chunks go back first, as many bytes, largest first (a new chunk is
  // asked for only when none of its size is kept, so those are of other sizes). So the
  // high-water mark grows with what is live, not with empty chunks of sizes the work has moved
  // away from; below it they stay, for the classes that may need them again.
  void make_room_for(std::size_t bytes) noexcept;
  // Keeps each chunk of the chain among the empty chunks, within max_retained, or frees it.
  void retire_chunks(chunk_header* chain) noexcept;
  void free_chunks(chunk_header* chain) noexcept;
  // The store of whole chunks of stack `index`'s size (the empty chunks, upstream): take as
  // take() and give as give() do for a class.
  std::uint32_t take_whole(unsigned index, std::uint32_t wanted, std::uint64_t allocations,
                           void** out);
  void give_whole(unsigned index, void* const* chunks, std::uint32_t count,
                  std::uint64_t allocations) noexcept;
  // Returns every block `table` records, and its storage, to upstream (the caller holds the
  // table's mutex): the large blocks, or the whole chunks out.
  void free_table(large_blocks& table) noexcept;
  void* allocate_large(std::size_t bytes, std::size_t alignment);
  void deallocate_large(void* block, std::size_t bytes, std::size_t alignment) noexcept;

  struct nothing {};
  using shared_counter = typename traits::shared_counter;

  // Written only by the constructor (and, unsync, own_cache_, which its fast paths use).
  std::pmr::memory_resource* const upstream_;
  const size_class_options options_;
  const void* const key_;  // the resource's address: what its threads' caches are found by
  unsigned class_count_ = 0;  // the classes pooled, up to max_pooled's
  std::size_t small_limit_ = 0;  // min(table_limit, max_pooled): sizes the table gives a class
  std::uint64_t idle_period_ = 0;  // cache_idle_time in nanoseconds
  std::array<class_info, cache_stack_count> info_{};
  [[no_unique_address]] std::conditional_t<per_thread_caches, nothing, size_class_cache>
      own_cache_{};

  // Touched in batches, each store on its own cache lines. A whole chunks' store keeps no
  // chunks of its own (they are among the empty chunks), only its counts.
  std::array<class_store<Policy>, cache_stack_count> stores_{};
  empty_chunks<Policy> empty_chunks_;
  [[no_unique_address]] std::conditional_t<per_thread_caches, thread_cache_set, nothing>
      thread_caches_{};

  // Whole chunks out of the empty chunks, with callers or in caches, so that release() returns
  // them: entered and removed a refill's or a flush's batch at a time, not on every call.
  mutable typename traits::mutex whole_mutex_;
  large_blocks whole_out_;  // guarded by whole_mutex_
  std::uint64_t whole_unknown_deallocations_ = 0;  // guarded by whole_mutex_

  mutable typename traits::mutex large_mutex_;
  large_blocks large_blocks_;                       // guarded by large_mutex_
  std::uint64_t large_allocations_ = 0;             // guarded by large_mutex_
  std::uint64_t large_deallocations_ = 0;           // guarded by large_mutex_
  std::uint64_t large_unknown_deallocations_ = 0;   // guarded by large_mutex_

  alignas(64) shared_counter bytes_from_upstream_;
  shared_counter peak_bytes_from_upstream_;
  shared_counter cache_slot_bytes_;  // of bytes_from_upstream_: the caches' slots
  // Updated on slow paths only, never by the fast paths.
  alignas(64) typename traits::mutex share_mutex_;  // count_caches writes the next two under it
  shared_counter caches_;              // caches attached to threads
  shared_counter cache_share_;         // max_cached_total / caches_, kept as caches come and go
  shared_counter cache_limit_bytes_;   // the caches' limit_bytes added up
  shared_counter last_sweep_;          // steady-clock nanoseconds of the last idle sweep
  shared_counter next_shard_;          // the shard of the next thread's cache, modulo shards
  // Caches attached to threads, by shard: a shard with none is orphaned, its chunks free to
  // adopt (class_store::adopt_chunk). Unsync: its one cache, never counted, in the one shard.
  std::array<shared_counter, class_store<Policy>::shards> caches_in_shard_{};
  // One reclaim of caches at a time, and none while stats() runs. A reclaim takes caches under
  // the registry's lock but gives their blocks back after it; without this, trim() could find
  // a sweep's caches already taken and their chunks not yet empty (and leave those chunks held
  // once the sweep ends), and stats() could count the blocks neither in a cache nor in a store.
  mutable typename traits::mutex reclaim_mutex_;
  idle_grace idle_grace_;  // guarded by reclaim_mutex_: whose caches the sweeps took lately
  // Declared last: the destructor stops it before anything else goes.
  [[no_unique_address]] std::conditional_t<per_thread_caches, idle_sweeper, nothing> sweeper_;
};

}  // namespace pmrkit::detail
