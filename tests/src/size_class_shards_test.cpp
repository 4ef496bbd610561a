// How the threads sharing one size_class_resource keep out of each other's way: they refill
// from chunks of their own (the class stores' shards, src/size_class_store.hpp), so two
// threads' blocks never share a chunk while both threads have caches, and a chunk that a
// thread left half used when it exited serves the next thread that needs one before a new
// chunk is taken from upstream (after release() too); and a thread that only frees what others
// allocated gives the blocks back in batches, not one lock at a time.
#include <barrier>
#include <catch2/catch.hpp>
#include <cstdint>
#include <set>
#include <thread>
#include <vector>

#include "pmrkit/size_class_resource.hpp"
#include "size_class_policy.hpp"

using pmrkit::size_class_options;
using pmrkit::size_class_resource;
using pmrkit::size_class_stats;

namespace {

constexpr std::size_t block_bytes = 64;

const size_class_stats::size_class& class_of(const size_class_stats& stats, std::size_t bytes) {
  for (const auto& c : stats.classes)
    if (c.block_size == bytes) return c;
  FAIL("no class of " << bytes << " bytes");
  return stats.classes.front();
}

std::set<std::uintptr_t> chunks_of(const std::vector<void*>& blocks, std::size_t chunk_bytes) {
  std::set<std::uintptr_t> chunks;
  for (void* b : blocks) chunks.insert(reinterpret_cast<std::uintptr_t>(b) & ~(chunk_bytes - 1));
  return chunks;
}

std::vector<void*> allocate_blocks(size_class_resource& pool, int count) {
  std::vector<void*> blocks;
  for (int i = 0; i < count; ++i) blocks.push_back(pool.allocate(block_bytes));
  return blocks;
}

}  // namespace

TEST_CASE("size_class: two threads' blocks lie in chunks of their own") {
  size_class_options options;
  options.cache_idle_time = {};  // no idle sweeps: the first thread keeps its cache while parked
  size_class_resource pool(options);
  std::vector<void*> first_blocks;
  std::vector<void*> second_blocks;
  std::barrier step(2);
  // The first thread allocates, then stays (with its cache) while the second allocates.
  std::thread first([&] {
    first_blocks = allocate_blocks(pool, 64);
    step.arrive_and_wait();
    step.arrive_and_wait();
    for (void* b : first_blocks) pool.deallocate(b, block_bytes);
  });
  step.arrive_and_wait();
  std::thread second([&] { second_blocks = allocate_blocks(pool, 64); });
  second.join();
  const size_class_stats stats = pool.stats();
  step.arrive_and_wait();
  first.join();

  const std::size_t chunk_bytes = class_of(stats, block_bytes).chunk_bytes;
  const std::set<std::uintptr_t> firsts = chunks_of(first_blocks, chunk_bytes);
  const std::set<std::uintptr_t> seconds = chunks_of(second_blocks, chunk_bytes);
  for (const std::uintptr_t chunk : seconds) CHECK(firsts.count(chunk) == 0);
  // 64 blocks fit in one chunk of the class: each thread took one.
  CHECK(class_of(stats, block_bytes).chunks == 2);
  for (void* b : second_blocks) pool.deallocate(b, block_bytes);
}

TEST_CASE("size_class: a chunk an exited thread left half used serves the next thread") {
  size_class_resource pool;
  std::vector<void*> first_blocks;
  std::thread([&] { first_blocks = allocate_blocks(pool, 40); }).join();
  const std::size_t chunks_before = class_of(pool.stats(), block_bytes).chunks;
  REQUIRE(chunks_before == 1);
  std::vector<void*> second_blocks;
  std::thread([&] { second_blocks = allocate_blocks(pool, 40); }).join();
  const size_class_stats stats = pool.stats();
  // The exited thread's shard has no cache: its chunk, with room for both, is taken over
  // rather than a new one from upstream.
  CHECK(class_of(stats, block_bytes).chunks == 1);
  CHECK(class_of(stats, block_bytes).live_blocks == 80);
  for (void* b : first_blocks) pool.deallocate(b, block_bytes);
  for (void* b : second_blocks) pool.deallocate(b, block_bytes);
}

TEST_CASE("size_class: after release(), a chunk an exited thread left half used still serves") {
  // release() detaches every cache, and a detached cache's thread never counts it out of its
  // shard: unless release() starts the shards' counts over, a shard that had a cache before it
  // looks in use for good, and what exited threads leave there is never taken over.
  size_class_options options;
  options.cache_idle_time = {};  // no sweeps: caches go only by release() and thread exit
  size_class_resource pool(options);
  pool.deallocate(pool.allocate(block_bytes), block_bytes);  // this thread's cache: the 1st shard
  pool.release();
  // Shards go to new caches in turn: after these, the next cache gets the 1st shard again.
  constexpr unsigned shards = pmrkit::detail::policy_traits<pmrkit::sync_policy>::store_shards;
  for (unsigned i = 1; i < shards; ++i)
    std::thread([&] { pool.deallocate(pool.allocate(block_bytes), block_bytes); }).join();
  std::vector<void*> first_blocks;
  std::thread([&] { first_blocks = allocate_blocks(pool, 40); }).join();
  REQUIRE(class_of(pool.stats(), block_bytes).chunks == 1);
  std::vector<void*> second_blocks;
  std::thread([&] { second_blocks = allocate_blocks(pool, 40); }).join();
  CHECK(class_of(pool.stats(), block_bytes).chunks == 1);
  CHECK(class_of(pool.stats(), block_bytes).live_blocks == 80);
  for (void* b : first_blocks) pool.deallocate(b, block_bytes);
  for (void* b : second_blocks) pool.deallocate(b, block_bytes);
}

TEST_CASE("size_class: a thread that only frees gives blocks back in batches") {
  // Before, its stacks' limits grew only on refills, which such a thread never takes: every
  // free went to the store alone, under the class's lock, and its cache held nothing.
  size_class_options options;
  options.cache_idle_time = {};
  size_class_resource pool(options);
  std::vector<void*> blocks;
  std::thread([&] { blocks = allocate_blocks(pool, 200); }).join();
  std::uint64_t cached_while_freeing = 0;
  std::thread([&] {
    for (void* b : blocks) pool.deallocate(b, block_bytes);
    // This thread's cache is the only one: the producer has exited.
    for (const std::uint64_t bytes : pool.stats().thread_cached_bytes)
      cached_while_freeing += bytes;
  }).join();
  const size_class_stats stats = pool.stats();
  CHECK(cached_while_freeing > 0);
  // At most a batch (32 KiB of blocks): a thread that never allocates has no use for more.
  CHECK(cached_while_freeing <= 32 * 1024);
  CHECK(class_of(stats, block_bytes).live_blocks == 0);
  CHECK(class_of(stats, block_bytes).cached_blocks == 0);  // its thread has exited
}
