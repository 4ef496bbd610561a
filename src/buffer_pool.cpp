#include "pmrkit/buffer_pool.hpp"

#include <algorithm>
#include <atomic>
#include <bit>
#include <limits>
#include <mutex>
#include <optional>
#include <stdexcept>
#include <string>
#include <vector>

#include "pmrkit/single_writer_counter.hpp"
#include "thread_cache_directory.hpp"

// How the pool keeps its bound without a locked instruction on the hot path:
//
// Each bucket has `free_slots`, the part of its max_per_bucket bound nobody holds. A retained
// block always occupies a slot: blocks in the shared bucket hold one each, and a thread's
// bucket_cache holds `credits` slots, at least as many as the blocks it keeps. So retained
// blocks never exceed max_per_bucket, and a thread that releases into and acquires from its
// own cache, within its credits, touches no shared memory at all. Slots move between the shared
// budget and a cache only when the cache grows, is trimmed, or its thread exits.
//
// The caches live in caches_, a thread_caches (thread_cache_directory.hpp), which orders the two
// ways a cache can end: its thread exits first (its blocks move to the shared buckets) or the
// pool is destroyed first (it frees the blocks, and the thread never touches the dead pool).

namespace pmrkit {
namespace {

using detail::thread_caches;

constexpr std::size_t max_request =
    static_cast<std::size_t>(std::numeric_limits<std::ptrdiff_t>::max());
// Buckets are powers of two, and no buffer may hold more than max_request: so no bucket is
// larger than this (2^62 with a 64-bit size_t), whatever max_capacity says.
constexpr std::size_t largest_bucket = std::bit_floor(max_request);
constexpr std::size_t max_thread_buffers_per_bucket = 1024;
// Shared buckets reserve room for this many blocks up front so steady-state returns never
// allocate bookkeeping; larger bounds grow the list on first use.
constexpr std::size_t shared_reserve_limit = 1024;

struct block {
  std::byte* data;
  std::size_t capacity;
};

// Each written by one thread at a time: a cache's by its thread (or, once the thread is gone
// or the pool is being destroyed, by whoever holds the cache's detach_mutex); the pool's
// retired counters under retired_mutex_.
struct counters {
  single_writer_counter<std::uint64_t> acquires;
  single_writer_counter<std::uint64_t> hits;
  single_writer_counter<std::uint64_t> misses;
  single_writer_counter<std::uint64_t> dropped_for_size;
  single_writer_counter<std::uint64_t> dropped_for_bound;
  single_writer_counter<std::uint64_t> buffers_retained;
  single_writer_counter<std::uint64_t> bytes_retained;
};
using counter_field = single_writer_counter<std::uint64_t> counters::*;

// One thread's blocks of one pool, per bucket.
struct bucket_cache {
  bucket_cache(std::size_t buckets, std::size_t per_bucket_limit, std::uint64_t current_epoch)
      : epoch(current_epoch),
        per_bucket(per_bucket_limit),
        blocks(buckets * per_bucket_limit),
        count(buckets, 0),
        credits(buckets, 0) {}

  block* bucket_blocks(std::size_t bucket) noexcept { return blocks.data() + bucket * per_bucket; }

  std::uint64_t epoch;  // the pool's trim epoch this cache last drained at
  const std::size_t per_bucket;
  std::vector<block> blocks;
  std::vector<std::size_t> count;
  std::vector<std::size_t> credits;
  counters stats;
};

class pool_engine {
 public:
  pool_engine(std::pmr::memory_resource* resource, const buffer_pool_options& options);
  pool_engine(const pool_engine&) = delete;
  pool_engine& operator=(const pool_engine&) = delete;
  ~pool_engine();

  block take(std::size_t request);
  void give_back(block returned) noexcept;
  void trim() noexcept;
  buffer_pool_stats stats() const;
  // Called by caches_ on the cache's exiting thread, under its detach_mutex, the pool alive.
  void absorb_exiting_cache(bucket_cache& cache) noexcept;

  std::pmr::memory_resource* const resource;
  const buffer_pool_options options;

 private:
  struct shared_bucket {
    std::mutex mutex;
    std::vector<block> blocks;                 // guarded by mutex
    std::atomic<std::size_t> free_slots{0};    // unheld part of max_per_bucket
    // For stats(); written under mutex.
    single_writer_counter<std::uint64_t> buffers;  // blocks.size()
    single_writer_counter<std::uint64_t> bytes;    // their capacities
  };

  std::size_t bucket_capacity(std::size_t bucket) const noexcept {
    return std::size_t{1} << (min_shift_ + bucket);
  }
  std::size_t bucket_for_request(std::size_t request) const noexcept {
    const std::size_t rounded = std::max(request, bucket_capacity(0));
    return static_cast<std::size_t>(std::bit_width(rounded - 1)) - min_shift_;
  }
  std::size_t bucket_for_capacity(std::size_t capacity) const noexcept {
    return static_cast<std::size_t>(std::bit_width(capacity)) - 1 - min_shift_;
  }

  bucket_cache* local_cache() noexcept;
  void note(bucket_cache* cache, counter_field field, std::uint64_t amount = 1) noexcept;
  bool take_slot(std::size_t bucket) noexcept;
  void return_slots(std::size_t bucket, std::size_t slots) noexcept;
  std::optional<block> pop_shared(std::size_t bucket) noexcept;
  bool push_shared(std::size_t bucket, block kept) noexcept;
  void free_block(block freed) noexcept;
  void drain(bucket_cache& cache) noexcept;  // frees its blocks, gives its slots back

  std::size_t min_shift_ = 0;
  std::size_t bucket_count_ = 0;
  std::size_t per_thread_ = 0;
  std::unique_ptr<shared_bucket[]> buckets_;
  std::atomic<std::uint64_t> epoch_{0};
  thread_caches<pool_engine, bucket_cache> caches_;
  mutable std::mutex retired_mutex_;
  counters retired_;  // threads that exited, and work done without a thread cache
};

[[noreturn]] void throw_bad_options(const std::string& what) {
  throw std::invalid_argument("pmrkit::buffer_pool: " + what);
}

pool_engine::pool_engine(std::pmr::memory_resource* memory, const buffer_pool_options& opts)
    : resource(memory), options(opts) {
  if (resource == nullptr) throw_bad_options("the memory resource must not be null");
  if (options.min_capacity == 0) throw_bad_options("min_capacity must be at least 1");
  if (options.max_capacity == 0) throw_bad_options("max_capacity must be at least 1");
  if (options.min_capacity > largest_bucket) {
    throw_bad_options("min_capacity " + std::to_string(options.min_capacity) +
                      " is too large: at most " + std::to_string(largest_bucket) +
                      ", the largest power of two a buffer may hold");
  }
  // Both round up to a power of two (a max_capacity past 2^62 to 2^62: no bucket is larger).
  if (std::bit_ceil(options.min_capacity) >
      std::bit_ceil(std::min(options.max_capacity, largest_bucket))) {
    throw_bad_options("min_capacity " + std::to_string(options.min_capacity) +
                      " must not exceed max_capacity " + std::to_string(options.max_capacity) +
                      " (both rounded up to a power of two)");
  }
  if (options.thread_buffers_per_bucket > max_thread_buffers_per_bucket) {
    throw_bad_options("thread_buffers_per_bucket " +
                      std::to_string(options.thread_buffers_per_bucket) +
                      " is too large: at most " + std::to_string(max_thread_buffers_per_bucket) +
                      " buffers per bucket per thread");
  }
  min_shift_ = static_cast<std::size_t>(std::countr_zero(std::bit_ceil(options.min_capacity)));
  // The top bucket is max_capacity rounded up to a power of two: with it rounded down, buffers
  // between the two (a UDP payload's 65,507 bytes) were allocated at their size every time, and
  // on return kept in the bucket below, where they served smaller requests only.
  const auto max_shift = static_cast<std::size_t>(
      std::countr_zero(std::bit_ceil(std::min(options.max_capacity, largest_bucket))));
  bucket_count_ = max_shift - min_shift_ + 1;
  per_thread_ = std::min(options.thread_buffers_per_bucket, options.max_per_bucket);
  buckets_ = std::make_unique<shared_bucket[]>(bucket_count_);
  for (std::size_t b = 0; b < bucket_count_; ++b) {
    buckets_[b].free_slots.store(options.max_per_bucket, std::memory_order_relaxed);
    buckets_[b].blocks.reserve(std::min(options.max_per_bucket, shared_reserve_limit));
  }
}

pool_engine::~pool_engine() {
  // Caches whose threads still run: free their blocks; the threads drop them later.
  caches_.detach_all([this](bucket_cache& cache) { drain(cache); });
  // Only now: a thread exiting meanwhile may have moved its blocks into the shared buckets.
  for (std::size_t b = 0; b < bucket_count_; ++b) {
    for (const block& kept : buckets_[b].blocks) free_block(kept);
  }
}

void pool_engine::free_block(block freed) noexcept {
  resource->deallocate(freed.data, freed.capacity, byte_buffer::alignment);
}

void pool_engine::note(bucket_cache* cache, counter_field field, std::uint64_t amount) noexcept {
  if (cache != nullptr) {
    (cache->stats.*field).add(amount);
  } else {
    const std::lock_guard lock(retired_mutex_);
    (retired_.*field).add(amount);
  }
}

bucket_cache* pool_engine::local_cache() noexcept {
  // nullptr (out of memory for bookkeeping, or the thread is past its exit hook, as when a
  // thread_local buffer is released during thread teardown): work through the shared buckets.
  const std::uint64_t epoch = epoch_.load(std::memory_order_acquire);
  bucket_cache* cache = caches_.find_or_make(this, bucket_count_, per_thread_, epoch);
  if (cache != nullptr && cache->epoch != epoch) drain(*cache);
  return cache;
}

bool pool_engine::take_slot(std::size_t bucket) noexcept {
  auto& free_slots = buckets_[bucket].free_slots;
  std::size_t available = free_slots.load(std::memory_order_relaxed);
  while (available > 0) {
    if (free_slots.compare_exchange_weak(available, available - 1, std::memory_order_relaxed)) {
      return true;
    }
  }
  return false;
}

void pool_engine::return_slots(std::size_t bucket, std::size_t slots) noexcept {
  if (slots > 0) buckets_[bucket].free_slots.fetch_add(slots, std::memory_order_relaxed);
}

std::optional<block> pool_engine::pop_shared(std::size_t bucket) noexcept {
  shared_bucket& shared = buckets_[bucket];
  std::lock_guard lock(shared.mutex);
  if (shared.blocks.empty()) return std::nullopt;
  const block taken = shared.blocks.back();
  shared.blocks.pop_back();
  shared.buffers.set(shared.blocks.size());
  shared.bytes.subtract(taken.capacity);
  return taken;
}

bool pool_engine::push_shared(std::size_t bucket, block kept) noexcept {
  shared_bucket& shared = buckets_[bucket];
  std::lock_guard lock(shared.mutex);
  try {
    shared.blocks.push_back(kept);
  } catch (...) {
    return false;
  }
  shared.buffers.set(shared.blocks.size());
  shared.bytes.add(kept.capacity);
  return true;
}

void pool_engine::drain(bucket_cache& cache) noexcept {
  for (std::size_t b = 0; b < bucket_count_; ++b) {
    block* kept = cache.bucket_blocks(b);
    for (std::size_t i = 0; i < cache.count[b]; ++i) free_block(kept[i]);
    return_slots(b, cache.credits[b]);
    cache.count[b] = 0;
    cache.credits[b] = 0;
  }
  cache.stats.buffers_retained.set(0);
  cache.stats.bytes_retained.set(0);
  cache.epoch = epoch_.load(std::memory_order_acquire);
}

block pool_engine::take(std::size_t request) {
  bucket_cache* cache = local_cache();
  if (request > bucket_capacity(bucket_count_ - 1)) {
    // Larger than any bucket: nothing retained can serve it.
    if (request > max_request) {
      throw std::length_error("pmrkit::buffer_pool::acquire(" + std::to_string(request) +
                              "): a buffer holds at most " + std::to_string(max_request) +
                              " bytes");
    }
    auto* data = static_cast<std::byte*>(resource->allocate(request, byte_buffer::alignment));
    note(cache, &counters::acquires);
    note(cache, &counters::misses);
    return {data, request};
  }

  const std::size_t b = bucket_for_request(request);
  if (cache != nullptr && cache->count[b] > 0) {
    const block taken = cache->bucket_blocks(b)[--cache->count[b]];
    cache->stats.buffers_retained.subtract(1);
    cache->stats.bytes_retained.subtract(taken.capacity);
    note(cache, &counters::acquires);
    note(cache, &counters::hits);
    return taken;
  }
  if (const auto taken = pop_shared(b)) {
    // Keep the block's slot as a credit, so that releasing it later into this thread's cache
    // needs no atomic operation.
    if (cache != nullptr && cache->credits[b] < per_thread_) {
      ++cache->credits[b];
    } else {
      return_slots(b, 1);
    }
    note(cache, &counters::acquires);
    note(cache, &counters::hits);
    return *taken;
  }
  const std::size_t capacity = bucket_capacity(b);
  auto* data = static_cast<std::byte*>(resource->allocate(capacity, byte_buffer::alignment));
  note(cache, &counters::acquires);
  note(cache, &counters::misses);
  return {data, capacity};
}

void pool_engine::give_back(block returned) noexcept {
  if (returned.capacity > bucket_capacity(bucket_count_ - 1)) {
    free_block(returned);
    note(local_cache(), &counters::dropped_for_size);
    return;
  }
  if (returned.capacity < bucket_capacity(0)) {
    free_block(returned);  // not a block this pool handed out; nothing to keep it for
    return;
  }
  const std::size_t b = bucket_for_capacity(returned.capacity);
  bucket_cache* cache = local_cache();
  if (cache != nullptr) {
    const bool room =
        cache->count[b] < cache->credits[b] ||
        (cache->credits[b] < per_thread_ && take_slot(b) && (++cache->credits[b], true));
    if (room) {
      cache->bucket_blocks(b)[cache->count[b]++] = returned;
      cache->stats.buffers_retained.add(1);
      cache->stats.bytes_retained.add(returned.capacity);
      return;
    }
  }
  if (take_slot(b)) {
    if (push_shared(b, returned)) return;
    return_slots(b, 1);
  }
  free_block(returned);
  note(cache, &counters::dropped_for_bound);
}

void pool_engine::trim() noexcept {
  // Other threads see the new epoch on their next use and drain their own caches then.
  epoch_.fetch_add(1, std::memory_order_acq_rel);
  if (bucket_cache* cache = caches_.find(this)) drain(*cache);
  for (std::size_t b = 0; b < bucket_count_; ++b) {
    shared_bucket& shared = buckets_[b];
    std::lock_guard lock(shared.mutex);
    for (const block& kept : shared.blocks) free_block(kept);
    return_slots(b, shared.blocks.size());
    shared.blocks.clear();
    shared.buffers.set(0);
    shared.bytes.set(0);
  }
}

void pool_engine::absorb_exiting_cache(bucket_cache& cache) noexcept {
  if (cache.epoch != epoch_.load(std::memory_order_acquire)) {
    drain(cache);  // a trim() asked for these blocks to be freed
  } else {
    for (std::size_t b = 0; b < bucket_count_; ++b) {
      const block* kept = cache.bucket_blocks(b);
      // Each kept block moves with the slot it holds; unused credits go back to the budget.
      for (std::size_t i = 0; i < cache.count[b]; ++i) {
        if (!push_shared(b, kept[i])) {
          free_block(kept[i]);
          return_slots(b, 1);
        }
      }
      return_slots(b, cache.credits[b] - cache.count[b]);
      cache.count[b] = 0;
      cache.credits[b] = 0;
    }
    cache.stats.buffers_retained.set(0);
    cache.stats.bytes_retained.set(0);
  }

  // stats() stops counting the cache once its thread has detached it (while_frozen), so its
  // totals move to retired_ within the same section (under the exit gate, at thread exit).
  const std::lock_guard lock(retired_mutex_);
  for (counter_field field : {&counters::acquires, &counters::hits, &counters::misses,
                              &counters::dropped_for_size, &counters::dropped_for_bound}) {
    (retired_.*field).add((cache.stats.*field).get());
  }
}

buffer_pool_stats pool_engine::stats() const {
  buffer_pool_stats result;
  const auto add = [&result](const counters& from) {
    result.acquires += from.acquires.get();
    result.hits += from.hits.get();
    result.misses += from.misses.get();
    result.dropped_for_size += from.dropped_for_size.get();
    result.dropped_for_bound += from.dropped_for_bound.get();
    result.buffers_retained += from.buffers_retained.get();
    result.bytes_retained += from.bytes_retained.get();
  };
  // Frozen, so what an exiting thread had is counted once: in its cache, or in retired_ and
  // the shared buckets.
  caches_.while_frozen([&](const bucket_cache& cache) { add(cache.stats); },
                       [&] {
                         {
                           const std::lock_guard lock(retired_mutex_);
                           add(retired_);
                         }
                         for (std::size_t b = 0; b < bucket_count_; ++b) {
                           result.buffers_retained += buckets_[b].buffers.get();
                           result.bytes_retained += buckets_[b].bytes.get();
                         }
                       });
  return result;
}

}  // namespace

struct buffer_pool::state final : pool_engine {
  using pool_engine::pool_engine;
};

buffer_pool::buffer_pool(std::pmr::memory_resource* resource, buffer_pool_options options)
    : state_(std::make_unique<state>(resource, options)) {}

buffer_pool::~buffer_pool() = default;

byte_buffer buffer_pool::acquire(std::size_t min_capacity) {
  const block taken = state_->take(min_capacity);
  return byte_buffer(this, state_->resource, taken.data, taken.capacity);
}

void buffer_pool::trim() { state_->trim(); }

buffer_pool_stats buffer_pool::stats() const { return state_->stats(); }

const buffer_pool_options& buffer_pool::options() const noexcept { return state_->options; }

std::pmr::memory_resource* buffer_pool::resource() const noexcept { return state_->resource; }

void buffer_pool::give_back(std::byte* data, std::size_t capacity) noexcept {
  state_->give_back({data, capacity});
}

}  // namespace pmrkit
