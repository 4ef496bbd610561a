// The slow paths of size_class_engine: cache misses and overflows, the shared stores, chunks,
// large blocks, release() and stats().
#include "size_class_engine.hpp"

#include <algorithm>
#include <bit>
#include <cassert>
#include <chrono>
#include <cstdint>
#include <cstring>
#include <exception>
#include <new>
#include <stdexcept>
#include <string>
#include <thread>
#include <utility>

namespace pmrkit::detail {
namespace {

// Every class's blocks fill seven eighths of its chunk wherever the header lands, and a
// returning block costs one metadata line (its chunk's bitmap shares the header's line: at most
// four words, 256 blocks, which only the 8-byte class overfills), at the smallest chunk_size,
// the default and the largest (size_class_chunk.hpp). No chunk has more than 512 block places,
// so chunk_header's 16-bit next_move and until_move hold any count.
constexpr bool every_layout_is_lean() {
  for (const std::size_t chunk_size :
       {smallest_chunk_bytes, size_class_options{}.chunk_size, largest_chunk_bytes}) {
    for (unsigned index = 0; index < size_classes::count; ++index) {
      const std::size_t size = size_classes::size_of(index);
      const std::size_t chunk = class_chunk_bytes(size, chunk_size);
      const chunk_layout layout = layout_of(chunk, size);
      if (std::size_t{layout.capacity} * size * 8 < chunk * 7) return false;
      if (size >= 16 && layout.bitmap_words * sizeof(std::uint64_t) + chunk_header_space > 64)
        return false;
      if (layout.first_header % 64 != 32) return false;
      if (layout.slots > 512) return false;
    }
  }
  return true;
}
static_assert(every_layout_is_lean());
// A refill moves at most this many bytes (and 64 blocks), so a refill is cheap and a thread
// does not hoard blocks of a class it used once.
constexpr std::size_t refill_bytes = 32 * 1024;
constexpr std::size_t max_batch = 64;
// A refill of whole chunks takes at most this many bytes of them and 8 chunks (a 512 KiB one
// alone), under one lock of the empty chunks: a request arena over this resource takes a chunk
// for every refill of its own, and sixteen threads' arenas that took them one at a time ran at
// half the speed of the class path (docs/size_class_containers.md, "Whole chunks for request
// arenas").
constexpr std::size_t whole_refill_bytes = 256 * 1024;
constexpr std::size_t max_whole_batch = 8;
// A refill touches the first this many blocks it hands out (refill, below).
constexpr std::uint32_t touch_ahead = 32;
// Classes up to this block size refill from chunks of their thread's shard; larger ones share
// one shard. Container nodes, keys and short arrays are where two threads' blocks side by side
// cost (docs/size_class_containers.md, "On every core"), and their chunks are 4-32 KiB; a
// larger class's chunk is 64 KiB or more, and a partly used one per shard of each of those
// classes held 80 MB where 45 did with 64 threads parked (size_class_many_threads_test).
constexpr std::size_t largest_sharded_block = 256;
// No class may hold more than half of a thread's budget, nor more than this many blocks.
constexpr std::size_t max_cached_blocks = 512;
// Every cache may grow to this (or thread_cache, if smaller) whatever its share of
// max_cached_total, so a thread among many still caches a refill or two of its classes.
constexpr std::size_t guaranteed_cache_bytes = 16 * 1024;
// Idle caches (issue 15). A cache whose thread neither allocated nor took a slow path between
// two sweeps is idle, and the second sweep takes it back. Sweeps are at least cache_idle_time
// apart: a thread's slow path looks at the clock once per sweep_check_interval of its slow
// paths and claims the sweep when the time has passed, and the sweeper thread (below) claims
// one when no thread has. So a parked thread's cache goes back within two sweeps of its last
// call (trim() takes it in any case). A thread the scheduler keeps waiting that long loses its
// cache too, and refills it in a few dozen slow paths. A thread that makes a cache again soon
// after a sweep took its last one was not parked, and its next cache waits for more idle sweeps
// (size_class_idle_grace.hpp). A sweep that takes nothing costs a walk of the caches under the
// registry's lock; one that takes caches, a process-wide barrier.
constexpr std::uint64_t sweep_check_interval = 64;
// Scavenging (tcmalloc's name): a cache looks every scavenge_check_interval slow paths, and once
// its thread has made scavenge_allocations allocations since the last time, each class the
// thread did not use in them (no allocation, no refill, no overflow) gives back half the blocks
// its stack holds, and half its limit (not its slots: a class used now and then comes back).
// Counted in the thread's own calls, not in time, so a thread that runs from its cache alone
// pays nothing, and a class in use keeps its cache whatever its pace. Without it, a class used
// one block at a time (a growing array, a hash table's buckets) kept the free blocks of its last
// refill, each such class pinning a chunk of its own for blocks nobody used (docs/size_class.md,
// "Memory a cache keeps"). Counted in slow paths alone, the interval shrank as slow paths came
// faster, and classes merely used less often than the rest looked idle: AllocPhases ran 1.26x
// slower.
constexpr std::uint64_t scavenge_check_interval = 64;
constexpr std::uint64_t scavenge_allocations = 8192;
// The sweeper thread wakes every this many cache_idle_times and sweeps only if no thread has
// swept for as long: while the threads of a resource take slow paths, they sweep, and the
// sweeper stays out of their way (a busy pool's timings are those without it); it covers the
// time when none does, when every thread is parked.
constexpr std::uint64_t sweeper_slack = 4;

// Writes the first word of a free block, so that its line is in the cache, writable, before
// the block is handed out.
void touch(void* block) noexcept {
  constexpr void* nothing = nullptr;
  std::memcpy(block, &nothing, sizeof nothing);
}

std::uint64_t steady_nanoseconds() noexcept {
  return static_cast<std::uint64_t>(std::chrono::duration_cast<std::chrono::nanoseconds>(
                                        std::chrono::steady_clock::now().time_since_epoch())
                                        .count());
}

void require(bool ok, const std::string& message) {
  if (!ok) throw std::invalid_argument("pmrkit: size_class: " + message);
}

}  // namespace

template <class Policy>
size_class_engine<Policy>::size_class_engine(const size_class_options& options,
                                             std::pmr::memory_resource* upstream,
                                             const void* key)
    : upstream_(upstream), options_(options), key_(key) {
  require(upstream != nullptr, "upstream resource is null");
  require(std::has_single_bit(options.max_pooled) && options.max_pooled >= size_classes::smallest &&
              options.max_pooled <= size_classes::largest,
          "max_pooled is " + std::to_string(options.max_pooled) +
              "; allowed: a power of two from 8 to 1048576 (1 MiB)");
  require(std::has_single_bit(options.chunk_size) && options.chunk_size >= smallest_chunk_bytes &&
              options.chunk_size <= largest_chunk_bytes,
          "chunk_size is " + std::to_string(options.chunk_size) +
              "; allowed: a power of two from 4096 (4 KiB) to 268435456 (256 MiB)");
  require(options.thread_cache <= std::size_t{1} << 30,
          "thread_cache is " + std::to_string(options.thread_cache) +
              " bytes; allowed: 0 (no caches) to 1073741824 (1 GiB)");
  require(options.cache_idle_time >= std::chrono::microseconds::zero() &&
              options.cache_idle_time <= std::chrono::minutes(10),
          "cache_idle_time is " + std::to_string(options.cache_idle_time.count()) +
              " microseconds; allowed: 0 (never) to 600000000 (ten minutes)");
  idle_period_ = static_cast<std::uint64_t>(
      std::chrono::duration_cast<std::chrono::nanoseconds>(options.cache_idle_time).count());

  class_count_ = size_classes::index_of(options.max_pooled) + 1;
  small_limit_ = std::min(table_limit, options.max_pooled);
  for (unsigned index = 0; index < class_count_; ++index) {
    class_info& info = info_[index];
    info.block_size = size_classes::size_of(index);
    info.block_reciprocal = block_reciprocal(info.block_size);
    info.chunk_bytes = class_chunk_bytes(info.block_size, options.chunk_size);
    info.chunk_shift = static_cast<unsigned>(std::countr_zero(info.chunk_bytes));
    info.layout = layout_of(info.chunk_bytes, info.block_size);
    info.batch = static_cast<std::uint32_t>(
        std::clamp<std::size_t>(refill_bytes / info.block_size, 1, max_batch));
    info.max_limit = static_cast<std::uint32_t>(
        std::min(max_cached_blocks, options.thread_cache / 2 / info.block_size));
  }
  // The whole chunks' stacks come after every class's; the classes past max_pooled keep their
  // info empty and their stacks without slots.
  for (unsigned index = size_classes::count; index < cache_stack_count; ++index) {
    class_info& info = info_[index];
    info.block_size = info.chunk_bytes = smallest_whole_chunk << (index - size_classes::count);
    info.chunk_shift = static_cast<unsigned>(std::countr_zero(info.chunk_bytes));
    info.batch = static_cast<std::uint32_t>(
        std::clamp<std::size_t>(whole_refill_bytes / info.block_size, 1, max_whole_batch));
    info.max_limit = static_cast<std::uint32_t>(
        std::min(max_cached_blocks, options.thread_cache / 2 / info.block_size));
  }
  if constexpr (!per_thread_caches) own_cache_ = size_class_cache(options.thread_cache);
  cache_share_.set(options.max_cached_total);
  last_sweep_.set(steady_nanoseconds());
}

template <class Policy>
size_class_engine<Policy>::~size_class_engine() {
  if constexpr (per_thread_caches) sweeper_.stop();
  release();
}

template <class Policy>
unsigned size_class_engine<Policy>::class_for(std::size_t bytes,
                                              std::size_t alignment) const noexcept {
  const std::size_t size = std::max<std::size_t>({bytes, alignment, 1});
  if (size > options_.max_pooled) return size_classes::none;
  if (size <= small_limit_ && alignment <= 16)
    return index_of_stack(stack_offsets[(size + 7) >> 3]);
  // Walks at most to bit_ceil(size), a class whose blocks are aligned to it, and no larger
  // than max_pooled (a power of two).
  unsigned index = size_classes::index_of(size);
  while (size_classes::alignment_of(index) < alignment) ++index;
  return index;
}

template <class Policy>
void* size_class_engine<Policy>::allocate_slow(std::size_t bytes, std::size_t alignment) {
  const unsigned index =
      is_whole_chunk(bytes, alignment) ? whole_chunk_index(bytes) : class_for(bytes, alignment);
  if (index == size_classes::none) return allocate_large(bytes, alignment);
  if constexpr (per_thread_caches) {
    size_class_cache* const local = local_cache();
    if (local == nullptr) return allocate_uncached(index);
    // local_cache() made this cache the thread's last used; a use is bracketed, and a cache
    // reclaimed between the lookup and the bracket is left alone (the uncached path may call
    // upstream: no reclaimer waits on that).
    cache_link& link = *this_thread_caches.last;
    begin_use(link);
    if (link.owner.load(std::memory_order_relaxed) != key_) {
      end_use(link);
      return allocate_uncached(index);
    }
    void* block = nullptr;
    try {
      block = allocate_from(*local, index);
    } catch (...) {
      end_use(link);
      throw;
    }
    end_use_and_sweep(link, *local);
    return block;
  } else {
    return allocate_from(own_cache_, index);
  }
}

template <class Policy>
void size_class_engine<Policy>::deallocate_slow(void* block, std::size_t bytes,
                                                std::size_t alignment) noexcept {
  const unsigned index =
      is_whole_chunk(bytes, alignment) ? whole_chunk_index(bytes) : class_for(bytes, alignment);
  if (index == size_classes::none) return deallocate_large(block, bytes, alignment);
  if constexpr (per_thread_caches) {
    size_class_cache* const local = local_cache();
    if (local == nullptr) return deallocate_uncached(block, index);
    cache_link& link = *this_thread_caches.last;  // as in allocate_slow
    begin_use(link);
    if (link.owner.load(std::memory_order_relaxed) != key_) {
      end_use(link);
      return deallocate_uncached(block, index);
    }
    deallocate_into(*local, block, index);
    end_use_and_sweep(link, *local);
  } else {
    deallocate_into(own_cache_, block, index);
  }
}

template <class Policy>
void size_class_engine<Policy>::overflow_from_fast_use(cache_link& link, size_class_cache& local,
                                                       unsigned index, void* block) noexcept {
  // Giving blocks back calls upstream, whose own fast paths use the thread's flag: the link's
  // flag is set before the thread's clears.
  begin_use(link);
  end_fast_use();
  overflow(local, index, block);
  end_use_and_sweep(link, local);
}

template <class Policy>
void size_class_engine<Policy>::end_use_and_sweep(cache_link& link,
                                                  size_class_cache& local) noexcept {
  const bool sweep = std::exchange(local.sweep_due, false);  // read while the cache is ours
  end_use(link);
  if (sweep) reclaim_idle_caches();
}

template <class Policy>
void* size_class_engine<Policy>::allocate_from(size_class_cache& local, unsigned index) {
  block_stack& stack = local.stacks[index];
  if (void* block; stack.try_pop(block)) return block;
  return refill(local, index);
}

template <class Policy>
void size_class_engine<Policy>::deallocate_into(size_class_cache& local, void* block,
                                                unsigned index) noexcept {
  if (!local.stacks[index].try_push(block)) overflow(local, index, block);
}

// ---------------------------------------------------------------- thread caches (sync)

template <class Policy>
auto size_class_engine<Policy>::local_cache() noexcept -> size_class_cache* {
  if constexpr (per_thread_caches) {
    if (size_class_cache* const found = thread_caches_.find(key_)) return found;
    // No cache (out of memory, or the thread is past its exit hook): the caller takes the
    // uncached path, which locks the class store for each block.
    // Shards go to caches in turn, so up to that many threads refill from chunks of their own.
    const auto shard =
        static_cast<std::uint8_t>((next_shard_.add(1) - 1) % class_store<Policy>::shards);
    // A thread whose last cache a sweep took back a moment ago was not parked: this one waits
    // for more idle sweeps (size_class_idle_grace.hpp).
    const void* const thread = &this_thread_caches;
    std::uint8_t sweeps_to_take = 1;
    if (idle_period_ != 0) {
      const std::lock_guard lock(reclaim_mutex_);
      sweeps_to_take =
          idle_grace_.sweeps_for_new_cache(thread, steady_nanoseconds(), idle_period_);
    }
    size_class_cache* const made =
        thread_caches_.make_keyed(key_, this, options_.thread_cache, shard, thread,
                                  sweeps_to_take);
    if (made) {
      count_caches(+1);
      caches_in_shard_[shard].add(1);
    }
    return made;
  } else {
    return &own_cache_;
  }
}

template <class Policy>
void size_class_engine<Policy>::absorb_exiting_cache(size_class_cache& local) noexcept {
  for (unsigned index = 0; index < cache_stack_count; ++index) {
    block_stack& stack = local.stacks[index];
    const std::uint32_t count = stack.count();
    const std::uint64_t allocations = stack.allocations.get();
    if (count == 0 && allocations == 0 && local.capacities[index] == 0) continue;
    give(index, stack.slots(), count, allocations);
    stack.allocations.set(0);
    drop_slots(local, index);  // the count and the limit go with the slots
  }
  if constexpr (per_thread_caches) {
    cache_limit_bytes_.subtract(local.limit_bytes);
    count_caches(-1);
    caches_in_shard_[local.shard].subtract(1);
  }
  local.limit_bytes = 0;
  local.allocations_at_scavenge = 0;  // the stacks' counts start over
  local.class_allocations_at_scavenge = {};
}

// ---------------------------------------------------------------- cache misses

template <class Policy>
void* size_class_engine<Policy>::refill(size_class_cache& local, unsigned index) {
  block_stack& stack = local.stacks[index];
  ++local.stack_slow_paths[index];
  note_slow_path(local);
  // A miss means the stack was too short for how this thread uses the class: lengthen it.
  grow_limit(local, index);
  // No room for any (the budget refused even one block): the store serves this one alone.
  if (local.capacities[index] == 0) return allocate_uncached(index);
  // The stack is empty: it may take up to its limit, a chunk's free blocks all at once when
  // they fit. They arrive lowest address first; the stack hands them out in that order.
  const std::uint32_t room = stack.limit() + 1;
  void** const slots = stack.slots();
  const unsigned shard = info_[index].block_size <= largest_sharded_block ? local.shard : 0;
  const std::uint32_t got =
      take(index, shard, std::min(info_[index].batch, room), room, 0, slots);
  std::reverse(slots, slots + got);
  // The caller writes these blocks soon. Touching the first of them here, in one pass in
  // address order (the stack's top is the lowest), takes their cache misses (and a fresh
  // chunk's page faults) together, overlapped, instead of one at a time in the middle of the
  // caller's work: a document built from fresh chunks took 1.2x the time without this pass.
  // Only the first touch_ahead: a refill may take a whole chunk's free blocks (hundreds),
  // most of which the stack hands out much later, and touching all of them cost more than it
  // saved: the pooled Map build took 1.05x mimalloc_plain's time with every block touched,
  // 1.01x with the first 32 (docs/size_class_containers.md, "How much of a refill to touch").
  const std::uint32_t touched = std::min(got, touch_ahead);
  for (std::uint32_t i = got; i > got - touched; --i) touch(slots[i - 1]);
  stack.set_count(got - 1);
  stack.allocations.add(1);
  return slots[got - 1];
}

template <class Policy>
void size_class_engine<Policy>::grow_limit(size_class_cache& local, unsigned index) noexcept {
  block_stack& stack = local.stacks[index];
  const class_info& info = info_[index];
  if (stack.limit() >= info.max_limit) return;
  // The limit doubles up to a batch, then grows a batch at a time: a class that misses once
  // costs the budget one block, not a batch, so a budget smaller than what the thread's
  // classes would like is shared out in small steps instead of whole batches that the next
  // miss of another class flushes again (docs/size_class.md, "A budget too small").
  const std::uint32_t step = std::min(
      {info.batch, std::max<std::uint32_t>(stack.limit(), 1), info.max_limit - stack.limit()});
  const std::size_t wanted = step * info.block_size;
  const std::size_t budget = cache_budget(local);
  // Out of budget: take limit back from other classes. A class this thread has stopped using
  // gives up its blocks here, and a cache over its share of max_cached_total shrinks to it.
  // A step that would not fit even if every other class gave up everything is refused before
  // they give anything (the cache still moves to its share).
  if (local.limit_bytes + wanted > budget) {
    if (std::size_t{stack.limit()} * info.block_size + wanted > budget) {
      if (local.limit_bytes > budget) shrink_to(local, budget, index);
      return;
    }
    shrink_to(local, budget - wanted, index);
  }
  // Slots for the larger limit first; without memory for them the limit stays.
  if (local.limit_bytes + wanted <= budget &&
      reserve_slots(local, index, stack.limit() + step, info.max_limit + 2)) {
    stack.set_limit(stack.limit() + step);
    local.limit_bytes += wanted;
    if constexpr (per_thread_caches) cache_limit_bytes_.add(wanted);
  }
}

template <class Policy>
bool size_class_engine<Policy>::reserve_slots(size_class_cache& local, unsigned index,
                                              std::uint32_t new_limit,
                                              std::uint32_t most) noexcept {
  std::uint32_t& capacity = local.capacities[index];
  const std::uint32_t grown = block_stack::capacity_for(capacity, new_limit, most);
  if (grown == capacity) return true;
  const std::size_t bytes = grown * sizeof(void*);
  void* larger = nullptr;
  try {
    larger = upstream_->allocate(bytes, alignof(void*));
  } catch (...) {
    // The limit stays and the call goes on: a larger stack speeds later calls up, it is not
    // the memory the caller asked for (and this may run inside a deallocate). What upstream
    // throws reaches a caller when a chunk is needed from it.
    return false;
  }
  cache_slot_bytes_.add(bytes);
  peak_bytes_from_upstream_.raise_to(bytes_from_upstream_.add(bytes));
  const std::uint32_t old_capacity = std::exchange(capacity, grown);
  local.slots_moves.begin_write();
  void** const old = local.stacks[index].replace_slots(static_cast<void**>(larger));
  local.slots_moves.end_write();
  free_slots(old, old_capacity);
  return true;
}

template <class Policy>
void size_class_engine<Policy>::drop_slots(size_class_cache& local, unsigned index) noexcept {
  local.slots_moves.begin_write();
  void** const old = local.stacks[index].take_slots();
  local.slots_moves.end_write();
  free_slots(old, std::exchange(local.capacities[index], 0));
}

template <class Policy>
void size_class_engine<Policy>::free_slots(void** slots, std::uint32_t capacity) noexcept {
  if (capacity == 0) return;  // the stack had none: `slots` is the empty stacks' floor
  const std::size_t bytes = capacity * sizeof(void*);
  upstream_->deallocate(slots, bytes, alignof(void*));
  cache_slot_bytes_.subtract(bytes);
  bytes_from_upstream_.subtract(bytes);
}

template <class Policy>
void size_class_engine<Policy>::note_slow_path(size_class_cache& local) noexcept {
  const std::uint64_t count = local.slow_paths.add(1);
  if (count % scavenge_check_interval == 0) scavenge(local);
  if constexpr (per_thread_caches) {
    if (count % sweep_check_interval != 0 || idle_period_ == 0 || caches_.get() < 2) return;
    if (claim_sweep(idle_period_)) local.sweep_due = true;
  }
}

template <class Policy>
void size_class_engine<Policy>::scavenge(size_class_cache& local) noexcept {
  std::uint64_t allocations = 0;
  for (unsigned index = 0; index < cache_stack_count; ++index)
    allocations += local.stacks[index].allocations.get();
  if (allocations - local.allocations_at_scavenge < scavenge_allocations) return;
  local.allocations_at_scavenge = allocations;
  std::size_t cut_bytes = 0;
  for (unsigned index = 0; index < cache_stack_count; ++index) {
    block_stack& stack = local.stacks[index];
    const auto class_allocations = static_cast<std::uint32_t>(stack.allocations.get());
    const bool allocated = std::exchange(local.class_allocations_at_scavenge[index],
                                         class_allocations) != class_allocations;
    if (std::exchange(local.stack_slow_paths[index], 0) != 0 || allocated || stack.limit() == 0)
      continue;
    if (const std::uint32_t held = stack.count()) flush(local, index, (held + 1) / 2);
    const std::uint32_t cut = (stack.limit() + 1) / 2;
    stack.set_limit(stack.limit() - cut);
    cut_bytes += cut * info_[index].block_size;
  }
  local.limit_bytes -= cut_bytes;
  if constexpr (per_thread_caches) cache_limit_bytes_.subtract(cut_bytes);
}

template <class Policy>
bool size_class_engine<Policy>::claim_sweep(std::uint64_t since) noexcept {
  // `last` first: read after it, the clock is not behind it (another thread's claim may land
  // between the two reads, and the replace below then fails).
  const std::uint64_t last = last_sweep_.get();
  const std::uint64_t now = steady_nanoseconds();
  // Of the threads that see the period over, one wins the sweep; the others carry on.
  return now >= last && now - last >= since && last_sweep_.replace(last, now);
}

template <class Policy>
bool size_class_engine<Policy>::sweep_from_sweeper(void* engine) noexcept {
  if constexpr (per_thread_caches) {
    auto& self = *static_cast<size_class_engine*>(engine);
    if (self.claim_sweep(sweeper_slack * self.idle_period_)) self.reclaim_idle_caches();
    // Tick again while a cache is out, or while the empty chunks are over idle_retained: the
    // last threads may have exited just after a sweep of their own, so that this one could
    // not claim its turn, and no later sweep would bring the idle resource down to it.
    return self.caches_.get() > 0 || self.empty_chunks_.bytes() > self.options_.idle_retained;
  } else {
    return false;
  }
}

template <class Policy>
void size_class_engine<Policy>::shrink_to(size_class_cache& local, std::size_t budget,
                                          unsigned keep) noexcept {
  const std::size_t before = local.limit_bytes;
  // Round robin until the limits fit, or a whole round found nothing left to cut. Each visit
  // halves a limit (as limits grow, by doubling), so a cache far over its budget (threads
  // came while it was large) takes several rounds, all within this one slow path.
  for (unsigned fruitless = 0; fruitless < cache_stack_count && local.limit_bytes > budget;) {
    const unsigned victim = local.steal_cursor;
    local.steal_cursor = victim + 1 < cache_stack_count ? victim + 1 : 0;
    block_stack& other = local.stacks[victim];
    if (victim == keep || other.limit() == 0) {
      ++fruitless;
      continue;
    }
    fruitless = 0;
    const std::uint32_t cut = std::max<std::uint32_t>(other.limit() / 2, 1);
    other.set_limit(other.limit() - cut);
    local.limit_bytes -= cut * info_[victim].block_size;
    const std::uint32_t held = other.count();
    if (held > other.limit()) flush(local, victim, held - other.limit());
    if (other.limit() == 0) drop_slots(local, victim);
  }
  if constexpr (per_thread_caches) cache_limit_bytes_.subtract(before - local.limit_bytes);
}

template <class Policy>
std::size_t size_class_engine<Policy>::cache_budget(const size_class_cache& local) const noexcept {
  if constexpr (!per_thread_caches) {
    return local.budget;
  } else {
    // A share is a target that caches move towards at their slow paths, not an invariant: it
    // changes as threads come and go.
    return std::min(local.budget,
                    std::max(static_cast<std::size_t>(cache_share_.get()), guaranteed_cache_bytes));
  }
}

template <class Policy>
void size_class_engine<Policy>::count_caches(int change) noexcept {
  std::uint64_t caches = 0;
  {
    // Under a lock so that the share last written is the one of the count last written
    // (threads arrive and leave rarely; the slow paths read both without it).
    const std::lock_guard lock(share_mutex_);
    if (change > 0) {
      caches = caches_.add(1);
    } else {
      caches_.subtract(1);
      caches = caches_.get();
    }
    cache_share_.set(options_.max_cached_total / std::max<std::uint64_t>(caches, 1));
  }
  if constexpr (per_thread_caches) {
    // Only arrivals: a departure may be the sweeper's own sweep, which holds its lock. An
    // arrival is never inside a use of a cache of this resource, which a sweep waits for.
    if (change < 0 || !options_.sweeper_thread || idle_period_ == 0) return;
    if (caches == 1) {
      sweeper_.wake();
    } else if (caches == 2 && can_fence_every_thread()) {
      sweeper_.start(std::chrono::nanoseconds(sweeper_slack * idle_period_), &sweep_from_sweeper,
                     this);
    }
  }
}

template <class Policy>
void size_class_engine<Policy>::reclaim_idle_caches() noexcept {
  if constexpr (per_thread_caches) {
    const size_class_cache* const mine = thread_caches_.find(key_);
    // A sweep is opportunistic: while trim(), stats() or another sweep holds the lock, this one
    // is skipped rather than waited for, so no slow path queues behind a snapshot.
    const std::unique_lock one_reclaim(reclaim_mutex_, std::try_to_lock);
    if (!one_reclaim.owns_lock()) return;
    // Runs under the registry's lock, one sweep at a time, so the sweep marks are ours to write.
    const std::uint64_t swept_at = steady_nanoseconds();
    thread_caches_.reclaim(
        [&](size_class_cache& cache) {
          // Allocations count too, so a thread that runs from its cache alone is not idle.
          std::uint64_t activity = cache.slow_paths.get();
          for (unsigned index = 0; index < cache_stack_count; ++index)
            activity += cache.stacks[index].allocations.get();
          const bool idle = activity == cache.activity_at_last_sweep;
          cache.activity_at_last_sweep = activity;
          const int idle_sweeps = idle ? std::min(cache.idle_sweeps + 1, 255) : 0;
          cache.idle_sweeps = static_cast<std::uint8_t>(idle_sweeps);
          return cache.idle_sweeps >= cache.sweeps_to_take && &cache != mine;
        },
        [&](size_class_cache& cache) {
          idle_grace_.taken(cache.thread, swept_at, cache.sweeps_to_take);
          absorb_exiting_cache(cache);
        });
    // Every thread's cache is back, so no thread has used the resource for a cache_idle_time:
    // what max_retained kept for its next burst goes back down to idle_retained. A sweep by a
    // thread with a cache of its own never gets here (it keeps its cache).
    if (caches_.get() == 0) {
      const std::uint64_t kept = empty_chunks_.bytes();
      if (kept > options_.idle_retained)
        free_chunks(empty_chunks_.take_for(kept - options_.idle_retained));
    }
  }
}

template <class Policy>
void size_class_engine<Policy>::overflow(size_class_cache& local, unsigned index,
                                         void* block) noexcept {
  // Frees outpace allocations on this thread (it consumes what others produce, or a burst
  // ends): give back half the limit's worth in one batch, so that the stack, with the block,
  // holds half its limit, as tcmalloc's lists do. A cache over its share of max_cached_total
  // (more threads came) shrinks to it first.
  block_stack& stack = local.stacks[index];
  ++local.stack_slow_paths[index];
  note_slow_path(local);
  const std::size_t budget = cache_budget(local);
  if (local.limit_bytes > budget) shrink_to(local, budget, cache_stack_count);
  // A stack of a class this cache never allocated grows too, up to a batch: a thread that only
  // frees it (it consumes what others produce, or its cache was taken back as idle while it
  // read and it now destroys what it built) otherwise gave every block back alone, under the
  // class's lock: the two threads of the pooled container destroys took 1.2-1.6x mimalloc's
  // time that way (docs/size_class_containers.md, "On every core"). Not beyond a batch: such a
  // thread has no use for more. Not for a class the thread allocates, whose refills grow its
  // limit: growing on its frees as well kept 200 KB more of the Document op's chunks.
  if (stack.limit() < info_[index].batch && stack.allocations.get() == 0) grow_limit(local, index);
  if (stack.limit() == 0) return give(index, &block, 1, 0);
  // count <= limit and the slots hold limit + 1, so the block has one; the flush may then give
  // it back too (a stack with a limit of one keeps nothing, and pins no chunk).
  const std::uint32_t count = stack.count() + 1;
  stack.slots()[count - 1] = block;
  stack.set_count(count);
  if (count > stack.limit()) flush(local, index, count - stack.limit() / 2);
}

template <class Policy>
void size_class_engine<Policy>::flush(size_class_cache& local, unsigned index,
                                      std::uint32_t count) noexcept {
  // The most recently freed go back; the stack keeps its older blocks.
  block_stack& stack = local.stacks[index];
  const std::uint32_t held = stack.count();
  give(index, stack.slots() + (held - count), count, 0);
  stack.set_count(held - count);
}

template <class Policy>
void* size_class_engine<Policy>::allocate_uncached(unsigned index) {
  void* block = nullptr;
  take(index, 0, 1, 1, 1, &block);
  return block;
}

template <class Policy>
void size_class_engine<Policy>::deallocate_uncached(void* block, unsigned index) noexcept {
  give(index, &block, 1, 0);
}

// ---------------------------------------------------------------- shared stores

template <class Policy>
std::uint32_t size_class_engine<Policy>::take(unsigned index, unsigned shard,
                                              std::uint32_t wanted, std::uint32_t most,
                                              std::uint64_t allocations, void** out) {
  if (is_whole_chunk_index(index)) return take_whole(index, wanted, allocations, out);
  class_store<Policy>& store = stores_[index];
  const class_info& info = info_[index];
  {
    const std::lock_guard lock(store.mutex);
    if (const std::uint32_t got = store.take(info, shard, wanted, most, out)) {
      store.allocations += allocations;
      return got;
    }
  }
  // None in this shard. A kept empty chunk holds no other thread's blocks; a chunk of a shard
  // that no cache uses costs no memory from upstream. A chunk of a shard in use stays there:
  // its threads' blocks and this one's would share lines again.
  chunk_header* chunk = kept_chunk(index);
  if (!chunk) {
    {
      const std::lock_guard lock(store.mutex);
      const auto orphaned = [this](unsigned s) { return caches_in_shard_[s].get() == 0; };
      if (store.adopt_chunk(shard, orphaned)) {
        store.allocations += allocations;
        return store.take(info, shard, wanted, most, out);
      }
    }
    // Upstream is called without the lock held; if it throws, nothing has changed.
    chunk = new_class_chunk(index);
  }
  const std::lock_guard lock(store.mutex);
  store.add_chunk(chunk, shard);
  store.allocations += allocations;
  return store.take(info, shard, wanted, most, out);
}

template <class Policy>
void size_class_engine<Policy>::give(unsigned index, void* const* blocks, std::uint32_t count,
                                     std::uint64_t allocations) noexcept {
  if (is_whole_chunk_index(index)) return give_whole(index, blocks, count, allocations);
  class_store<Policy>& store = stores_[index];
  chunk_header* emptied = nullptr;
  {
    const std::lock_guard lock(store.mutex);
    store.give(info_[index], blocks, count, emptied);
    store.allocations += allocations;
  }
  retire_chunks(emptied);
}

template <class Policy>
std::uint32_t size_class_engine<Policy>::take_whole(unsigned index, std::uint32_t wanted,
                                                    std::uint64_t allocations, void** out) {
  const std::size_t bytes = info_[index].chunk_bytes;
  std::array<chunk_header*, max_whole_batch> kept;
  std::uint32_t got =
      empty_chunks_.take_some(bytes, std::min<std::uint32_t>(wanted, max_whole_batch), kept.data());
  for (std::uint32_t i = 0; i < got; ++i) out[i] = base_of_chunk(kept[i], bytes);
  if (got == 0) {
    // None of this size is kept: a new one, which may first take the place of kept ones of
    // other sizes (make_room_for), as a class's new chunk does.
    make_room_for(bytes);
    out[0] = new_chunk(bytes);
    got = 1;
  }
  std::size_t table_grew_by = 0;
  std::exception_ptr refused;
  {
    const std::lock_guard lock(whole_mutex_);
    std::uint32_t entered = 0;
    try {
      for (; entered < got; ++entered)
        table_grew_by += whole_out_.insert({out[entered], bytes, bytes}, upstream_);
    } catch (...) {
      // Upstream refused the table room: none of the chunks goes out.
      while (entered > 0) whole_out_.erase(out[--entered]);
      refused = std::current_exception();
    }
  }
  if (refused) {
    // The table kept what it grew by before the failure; the chunks go back where they came
    // from, outside the lock (beyond max_retained, to upstream).
    peak_bytes_from_upstream_.raise_to(bytes_from_upstream_.add(table_grew_by));
    chunk_header* chain = nullptr;
    for (std::uint32_t i = 0; i < got; ++i) {
      chunk_header* const chunk = empty_chunk_at(out[i], bytes);
      chunk->next = chain;
      chain = chunk;
    }
    retire_chunks(chain);
    std::rethrow_exception(refused);
  }
  if (table_grew_by != 0)
    peak_bytes_from_upstream_.raise_to(bytes_from_upstream_.add(table_grew_by));
  class_store<Policy>& store = stores_[index];
  const std::lock_guard lock(store.mutex);
  store.blocks_out += got;
  store.allocations += allocations;
  return got;
}

template <class Policy>
void size_class_engine<Policy>::give_whole(unsigned index, void* const* chunks,
                                           std::uint32_t count,
                                           std::uint64_t allocations) noexcept {
  const std::size_t bytes = info_[index].chunk_bytes;
  chunk_header* chain = nullptr;
  std::uint32_t known = 0;
  {
    const std::lock_guard lock(whole_mutex_);
    for (std::uint32_t i = 0; i < count; ++i) {
      if (whole_out_.erase(chunks[i]).address == nullptr) {
        // Not ours: never given out, freed twice, or freed after release(). Keeping it would
        // hand out memory this resource does not own; count it so stats() shows the caller's
        // bug, as for a large block.
        ++whole_unknown_deallocations_;
        assert(!"pmrkit: size_class: deallocate() of a whole chunk this resource does not hold");
        continue;
      }
      chunk_header* const chunk = empty_chunk_at(chunks[i], bytes);
      chunk->next = chain;
      chain = chunk;
      ++known;
    }
    // None out: the table goes too, so that a resource with nothing out holds only chunks.
    if (whole_out_.size() == 0) free_table(whole_out_);
  }
  {
    class_store<Policy>& store = stores_[index];
    const std::lock_guard lock(store.mutex);
    store.blocks_out -= known;
    store.allocations += allocations;
  }
  retire_chunks(chain);
}

template <class Policy>
chunk_header* size_class_engine<Policy>::kept_chunk(unsigned index) noexcept {
  const class_info& info = info_[index];
  chunk_header* const kept = empty_chunks_.take(info.chunk_bytes);
  if (!kept) return nullptr;
  // Its header lay where its last class put it; the format puts it where this class's layout
  // does.
  return format_chunk(base_of_chunk(kept, info.chunk_bytes), info.chunk_bytes, info.layout,
                      info.block_size);
}

template <class Policy>
chunk_header* size_class_engine<Policy>::new_class_chunk(unsigned index) {
  const class_info& info = info_[index];
  // None of this size is kept: the new chunk may first take the place of kept ones of other
  // sizes, which serve only classes of their own size.
  make_room_for(info.chunk_bytes);
  return format_chunk(new_chunk(info.chunk_bytes), info.chunk_bytes, info.layout,
                      info.block_size);
}

template <class Policy>
void size_class_engine<Policy>::make_room_for(std::size_t bytes) noexcept {
  if (bytes_from_upstream_.get() + bytes <= peak_bytes_from_upstream_.get()) return;
  free_chunks(empty_chunks_.take_for(bytes));
}

template <class Policy>
std::byte* size_class_engine<Policy>::new_chunk(std::size_t chunk_bytes) {
  void* const memory = upstream_->allocate(chunk_bytes, chunk_bytes);
  if (reinterpret_cast<std::uintptr_t>(memory) & (chunk_bytes - 1)) {
    upstream_->deallocate(memory, chunk_bytes, chunk_bytes);
    throw std::runtime_error("pmrkit: size_class: upstream returned a block of " +
                             std::to_string(chunk_bytes) + " bytes that is not aligned to " +
                             std::to_string(chunk_bytes) +
                             " as requested; use an upstream that honours alignment");
  }
  peak_bytes_from_upstream_.raise_to(bytes_from_upstream_.add(chunk_bytes));
  return static_cast<std::byte*>(memory);
}

template <class Policy>
void size_class_engine<Policy>::retire_chunks(chunk_header* chain) noexcept {
  if (chain) free_chunks(empty_chunks_.keep_some(chain, options_.max_retained));
}

template <class Policy>
void size_class_engine<Policy>::free_chunks(chunk_header* chain) noexcept {
  while (chain) {
    chunk_header* const next = chain->next;
    const std::size_t bytes = chain->bytes;
    upstream_->deallocate(base_of_chunk(chain), bytes, bytes);
    bytes_from_upstream_.subtract(bytes);
    chain = next;
  }
}

// ---------------------------------------------------------------- large blocks

template <class Policy>
void* size_class_engine<Policy>::allocate_large(std::size_t bytes, std::size_t alignment) {
  // No object exceeds PTRDIFF_MAX bytes, and an upstream over libstdc++'s aligned operator new
  // would return a tiny block for a size near SIZE_MAX rather than fail.
  if (bytes > PTRDIFF_MAX) throw std::bad_alloc();
  make_room_for(bytes);
  void* const block = upstream_->allocate(bytes, alignment);
  std::size_t table_grew_by = 0;
  try {
    const std::lock_guard lock(large_mutex_);
    table_grew_by = large_blocks_.insert({block, bytes, alignment}, upstream_);
    ++large_allocations_;
  } catch (...) {
    upstream_->deallocate(block, bytes, alignment);
    throw;
  }
  peak_bytes_from_upstream_.raise_to(bytes_from_upstream_.add(bytes + table_grew_by));
  return block;
}

template <class Policy>
void size_class_engine<Policy>::deallocate_large(void* block, std::size_t bytes,
                                                 std::size_t alignment) noexcept {
  {
    const std::lock_guard lock(large_mutex_);
    if (large_blocks_.erase(block).address == nullptr) {
      // Not ours: never given out here, freed twice, or freed after release(). Freeing it
      // would hand upstream memory it may not own; count it so stats() shows the caller's bug.
      ++large_unknown_deallocations_;
      assert(!"pmrkit: size_class: deallocate() of a large block this resource does not hold");
      return;
    }
    ++large_deallocations_;
  }
  bytes_from_upstream_.subtract(bytes);
  upstream_->deallocate(block, bytes, alignment);
}

template <class Policy>
void size_class_engine<Policy>::free_table(large_blocks& table) noexcept {
  table.for_each([&](const large_blocks::block& b) {
    upstream_->deallocate(b.address, b.bytes, b.alignment);
    bytes_from_upstream_.subtract(b.bytes);
  });
  bytes_from_upstream_.subtract(table.storage_bytes());
  table.release_storage(upstream_);
}

// ---------------------------------------------------------------- release and stats

template <class Policy>
void size_class_engine<Policy>::release() noexcept {
  // No sweep may give blocks back into the chunks freed below.
  [[maybe_unused]] const auto no_sweeps = [&] {
    if constexpr (per_thread_caches) return sweeper_.pause();
    else return 0;
  }();
  // The caches' blocks lie in chunks freed below: nothing to take back from them but their
  // slots, which came from upstream too.
  const auto drop_every_slot = [&](size_class_cache& cache) {
    for (unsigned index = 0; index < cache.stacks.size(); ++index) drop_slots(cache, index);
  };
  if constexpr (per_thread_caches) {
    thread_caches_.detach_all(drop_every_slot);
    caches_.set(0);
    // A detached cache's thread never counts it out of its shard (absorb_exiting_cache does
    // that only for attached ones): otherwise its shard would look in use for good, and what
    // threads leave there would never be adopted.
    for (shared_counter& in_shard : caches_in_shard_) in_shard.set(0);
    cache_share_.set(options_.max_cached_total);
    cache_limit_bytes_.set(0);
  } else {
    drop_every_slot(own_cache_);
    own_cache_ = size_class_cache(options_.thread_cache);
  }
  for (unsigned index = 0; index < cache_stack_count; ++index) {
    chunk_header* all = nullptr;
    {
      const std::lock_guard lock(stores_[index].mutex);
      all = stores_[index].take_every_chunk();  // none for a whole chunks' store: counts only
    }
    free_chunks(all);
  }
  free_chunks(empty_chunks_.take_all());
  {
    // Whole chunks with callers or in the caches dropped above.
    const std::lock_guard lock(whole_mutex_);
    free_table(whole_out_);
  }
  const std::lock_guard lock(large_mutex_);  // release() runs alone; this only orders memory
  free_table(large_blocks_);
  large_allocations_ = large_deallocations_ = large_unknown_deallocations_ = 0;
  whole_unknown_deallocations_ = 0;  // release() runs alone
}

template <class Policy>
void size_class_engine<Policy>::trim() noexcept {
  if constexpr (per_thread_caches) {
    // Every thread's cache, parked threads' included, taken while they may be running
    // (thread_cache_directory.hpp); each thread makes a new one at its next call. A sweep in
    // progress ends first, so the chunks its caches empty are among those freed below.
    const std::lock_guard one_reclaim(reclaim_mutex_);
    thread_caches_.reclaim([](const size_class_cache&) { return true; },
                           [&](size_class_cache& cache) { absorb_exiting_cache(cache); });
    if (!can_fence_every_thread()) {
      // No process-wide barrier on this system: only the calling thread's own cache.
      if (size_class_cache* const local = thread_caches_.find(key_)) {
        for (unsigned index = 0; index < cache_stack_count; ++index) {
          const std::uint32_t held = local->stacks[index].count();
          if (held > 0) flush(*local, index, held);
        }
      }
    }
  } else {
    absorb_exiting_cache(own_cache_);
  }
  free_chunks(empty_chunks_.take_all());
  // The large blocks' table, once none is out: trim() leaves only what live blocks need.
  // (deallocate_large leaves it, so that alternating large calls do not remake it each time.)
  const std::lock_guard lock(large_mutex_);
  if (large_blocks_.size() == 0) free_table(large_blocks_);
}

template <class Policy>
size_class_stats size_class_engine<Policy>::stats() const {
  size_class_stats out;
  // The classes, then the whole chunks' sizes (split apart below).
  std::vector<size_class_stats::size_class> entries(cache_stack_count);
  for (unsigned index = 0; index < cache_stack_count; ++index) {
    entries[index].block_size = info_[index].block_size;
    entries[index].chunk_bytes = info_[index].chunk_bytes;
    entries[index].blocks_per_chunk =
        is_whole_chunk_index(index) ? 1 : info_[index].layout.capacity;
  }
  const auto add_cache = [&](const size_class_cache& local) {
    std::uint64_t bytes = 0;
    // A stack's count is the distance between two addresses, read together only while its
    // slots stay put: read again if any of this cache's slots moved meanwhile.
    std::array<std::uint32_t, cache_stack_count> counts{};
    for (;;) {
      const std::uint64_t moves = local.slots_moves.begin_read();
      for (unsigned index = 0; index < cache_stack_count; ++index)
        counts[index] = local.stacks[index].count();
      if (!local.slots_moves.read_again(moves)) break;
      std::this_thread::yield();
    }
    for (unsigned index = 0; index < cache_stack_count; ++index) {
      entries[index].allocations += local.stacks[index].allocations.get();
      entries[index].cached_blocks += counts[index];
      bytes += counts[index] * info_[index].block_size;
    }
    out.thread_cached_bytes.push_back(bytes);
    out.cached_bytes += bytes;
  };
  const auto add_stores = [&] {
    for (unsigned index = 0; index < cache_stack_count; ++index) {
      const class_store<Policy>& store = stores_[index];
      size_class_stats::size_class& entry = entries[index];
      const std::lock_guard lock(store.mutex);
      entry.allocations += store.allocations;
      // A whole chunk is held as long as it is out of the store, with a caller or cached.
      entry.chunks = is_whole_chunk_index(index) ? store.blocks_out : store.chunks;
      entry.chunk_blocks = is_whole_chunk_index(index) ? store.blocks_out : store.chunk_blocks;
      entry.free_blocks = entry.chunk_blocks - store.blocks_out;
      // Blocks out of the store are live or cached (frees are not counted per call).
      entry.live_blocks = store.blocks_out;
    }
  };
  if constexpr (per_thread_caches) {
    const std::lock_guard no_reclaim(reclaim_mutex_);
    thread_caches_.while_frozen(add_cache, add_stores);
  } else {
    add_cache(own_cache_);
    add_stores();
  }
  for (auto& entry : entries) {
    // While other threads run, the parts may disagree a little; never report a negative.
    entry.live_blocks =
        entry.live_blocks > entry.cached_blocks ? entry.live_blocks - entry.cached_blocks : 0;
    entry.deallocations =
        entry.allocations > entry.live_blocks ? entry.allocations - entry.live_blocks : 0;
  }
  out.classes.assign(entries.begin(), entries.begin() + class_count_);
  out.whole_chunks.assign(entries.begin() + size_classes::count, entries.end());
  {
    const std::lock_guard lock(large_mutex_);
    out.large_allocations = large_allocations_;
    out.large_deallocations = large_deallocations_;
    out.large_live_blocks = large_blocks_.size();
    out.large_unknown_deallocations = large_unknown_deallocations_;
  }
  {
    const std::lock_guard lock(whole_mutex_);
    out.large_unknown_deallocations += whole_unknown_deallocations_;
  }
  out.bytes_from_upstream = bytes_from_upstream_.get();
  // The peak is raised just after the bytes grow; a snapshot in between must not show less.
  out.peak_bytes_from_upstream = std::max(peak_bytes_from_upstream_.get(), out.bytes_from_upstream);
  out.empty_chunk_bytes = empty_chunks_.bytes();
  out.cache_slot_bytes = cache_slot_bytes_.get();
  if constexpr (per_thread_caches) {
    out.cache_limit_bytes = cache_limit_bytes_.get();
  } else {
    out.cache_limit_bytes = own_cache_.limit_bytes;
  }
  return out;
}

template class size_class_engine<sync_policy>;
template class size_class_engine<unsync_policy>;

}  // namespace pmrkit::detail
