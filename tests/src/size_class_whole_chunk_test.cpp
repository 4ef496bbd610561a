// size_class's whole chunks: a request shaped as a chunk (a power of two from 8 KiB to 512 KiB,
// aligned to its size), which is what a pool over a size_class asks for its own chunks, takes a
// whole chunk, cached per thread like a block of a class and behind that kept among the empty
// chunks, so a request arena over a long-lived pool holds about what it would over new_delete
// rather than 1.35-1.58x its live bytes.
#include <catch2/catch.hpp>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <thread>
#include <vector>

#include "pmrkit/counting_resource.hpp"
#include "pmrkit/size_class_resource.hpp"
#include "pmrkit/testing/failure_sweep.hpp"
#include "test_resources.hpp"

using pmrkit::size_class_options;
using pmrkit::size_class_resource;
using pmrkit::size_class_stats;
using pmrkit::size_class_unsync_resource;
using pmrkit::test::check_pattern;
using pmrkit::test::fill_pattern;

namespace {

constexpr std::size_t kib = 1024;

const size_class_stats::size_class& entry_of(const std::vector<size_class_stats::size_class>& all,
                                             std::size_t size) {
  for (const auto& c : all)
    if (c.block_size == size) return c;
  FAIL("no entry of " << size << " bytes");
  return all.front();
}
const size_class_stats::size_class& class_of(const size_class_stats& s, std::size_t size) {
  return entry_of(s.classes, size);
}
const size_class_stats::size_class& whole_of(const size_class_stats& s, std::size_t size) {
  return entry_of(s.whole_chunks, size);
}

std::uint64_t whole_held(const size_class_stats& s) {
  std::uint64_t chunks = 0;
  for (const auto& c : s.whole_chunks) chunks += c.chunks;
  return chunks;
}

size_class_options uncached() {
  size_class_options o;
  o.thread_cache = 0;  // every whole chunk goes straight back among the empty chunks
  return o;
}

}  // namespace

TEMPLATE_TEST_CASE("size_class: a request shaped as a chunk takes a whole chunk and comes back "
                   "among the empty ones", "[size_class][whole_chunk]", size_class_resource,
                   size_class_unsync_resource) {
  pmrkit::counting_resource upstream;
  TestType r(uncached(), &upstream);

  void* chunk = r.allocate(64 * kib, 64 * kib);
  CHECK(reinterpret_cast<std::uintptr_t>(chunk) % (64 * kib) == 0);
  // One chunk of its own size, beside the small table that records the whole chunks out, and
  // no class holds it (the class of 64 KiB blocks would have taken a 512 KiB chunk of seven).
  const std::uint64_t table = r.stats().bytes_from_upstream - 64 * kib;
  CHECK(table < 4 * kib);
  CHECK(upstream.stats().bytes_in_use == 64 * kib + table);
  CHECK(whole_of(r.stats(), 64 * kib).live_blocks == 1);
  CHECK(whole_of(r.stats(), 64 * kib).allocations == 1);
  CHECK(r.stats().large_allocations == 0);
  CHECK(class_of(r.stats(), 64 * kib).chunks == 0);

  // Back among the empty chunks, still held; the table goes with the last one out. The next
  // such request takes the chunk again.
  r.deallocate(chunk, 64 * kib, 64 * kib);
  CHECK(whole_held(r.stats()) == 0);
  CHECK(r.stats().empty_chunk_bytes == 64 * kib);
  CHECK(upstream.stats().bytes_in_use == 64 * kib);
  void* again = r.allocate(64 * kib, 64 * kib);
  CHECK(again == chunk);
  CHECK(upstream.stats().bytes_in_use == 64 * kib + table);
  r.deallocate(again, 64 * kib, 64 * kib);

  // A class whose chunks are 64 KiB (384-byte blocks) takes it too: what an arena gave back
  // serves any class of its chunk size.
  REQUIRE(class_of(r.stats(), 384).chunk_bytes == 64 * kib);
  void* block = r.allocate(384, 8);
  const auto at = reinterpret_cast<std::uintptr_t>(block);
  CHECK(at - reinterpret_cast<std::uintptr_t>(chunk) < 64 * kib);
  CHECK(r.stats().empty_chunk_bytes == 0);
  CHECK(upstream.stats().bytes_in_use == 64 * kib);
  r.deallocate(block, 384, 8);

  r.release();
  CHECK(upstream.stats().bytes_in_use == 0);
}

TEMPLATE_TEST_CASE("size_class: a thread caches the whole chunks it frees",
                   "[size_class][whole_chunk]", size_class_resource, size_class_unsync_resource) {
  pmrkit::counting_resource upstream;
  TestType r({}, &upstream);
  std::vector<void*> chunks;
  for (int i = 0; i < 4; ++i) chunks.push_back(r.allocate(32 * kib, 32 * kib));
  CHECK(whole_of(r.stats(), 32 * kib).live_blocks == 4);
  for (void* p : chunks) r.deallocate(p, 32 * kib, 32 * kib);
  // In the cache, as freed blocks of a class are: no lock, and the next request takes the last
  // one freed.
  const size_class_stats s = r.stats();
  CHECK(whole_of(s, 32 * kib).live_blocks == 0);
  CHECK(whole_of(s, 32 * kib).cached_blocks > 0);
  CHECK(s.cached_bytes >= whole_of(s, 32 * kib).cached_blocks * 32 * kib);
  void* again = r.allocate(32 * kib, 32 * kib);
  CHECK(again == chunks.back());
  r.deallocate(again, 32 * kib, 32 * kib);
  // trim() takes the cache back and returns the empty chunks.
  r.trim();
  CHECK(whole_held(r.stats()) == 0);
  CHECK(r.stats().empty_chunk_bytes == 0);
  CHECK(upstream.stats().bytes_in_use == r.stats().cache_slot_bytes);
}

TEMPLATE_TEST_CASE("size_class: only chunk-shaped requests from 8 KiB to 512 KiB take whole "
                   "chunks", "[size_class][whole_chunk]", size_class_resource,
                   size_class_unsync_resource) {
  pmrkit::counting_resource upstream;
  size_class_options options = uncached();
  options.max_pooled = 1024 * kib;
  TestType r(options, &upstream);
  struct request {
    std::size_t bytes, alignment;
  };
  // 4 KiB pages keep their class (and the thread's cache): a page buffer is a common request.
  // A size that is not its alignment, or an alignment below a page, is an ordinary block; above
  // 512 KiB a class or upstream serves it as before.
  for (const request q :
       {request{4 * kib, 4 * kib}, request{8 * kib, 16}, request{8 * kib, 4 * kib},
        request{4 * kib, 8 * kib}, request{24 * kib, 8 * kib}, request{1024 * kib, 1024 * kib}}) {
    void* p = r.allocate(q.bytes, q.alignment);
    CHECK(reinterpret_cast<std::uintptr_t>(p) % q.alignment == 0);
    CHECK(whole_held(r.stats()) == 0);
    r.deallocate(p, q.bytes, q.alignment);
  }
  for (const std::size_t bytes : {8 * kib, 16 * kib, 32 * kib, 64 * kib, 128 * kib, 256 * kib,
                                  512 * kib}) {
    void* p = r.allocate(bytes, bytes);
    CHECK(reinterpret_cast<std::uintptr_t>(p) % bytes == 0);
    CHECK(whole_of(r.stats(), bytes).live_blocks == 1);
    CHECK(whole_held(r.stats()) == 1);
    r.deallocate(p, bytes, bytes);
  }
  CHECK(r.stats().whole_chunks.size() == 7);
  r.release();
  CHECK(upstream.stats().bytes_in_use == 0);
}

// Every class has a stack in a thread's cache, pooled or not, and the whole chunks' stacks come
// after them all: the fast paths find a size's stack in a table that is the same for every
// max_pooled, so a size past max_pooled must name a stack that never has slots, never a whole
// chunk's (which would hand a 300-byte request an 8 KiB chunk, or cache it as one).
TEMPLATE_TEST_CASE("size_class: with a small max_pooled, whole chunks and the sizes past it "
                   "stay apart", "[size_class][whole_chunk]", size_class_resource,
                   size_class_unsync_resource) {
  pmrkit::counting_resource upstream;
  size_class_options options;
  options.max_pooled = 256;
  TestType r(options, &upstream);
  const std::vector<std::size_t> whole_sizes = {8 * kib,   16 * kib,  32 * kib, 64 * kib,
                                                128 * kib, 256 * kib, 512 * kib};
  // Two of each size, freed: the thread's cache keeps whole chunks of every size.
  for (const std::size_t bytes : whole_sizes) {
    void* const a = r.allocate(bytes, bytes);
    void* const b = r.allocate(bytes, bytes);
    r.deallocate(a, bytes, bytes);
    r.deallocate(b, bytes, bytes);
  }
  const size_class_stats cached = r.stats();
  for (const std::size_t bytes : whole_sizes) CHECK(whole_of(cached, bytes).cached_blocks > 0);
  CHECK(cached.classes.back().block_size == 256);
  for (std::size_t bytes = 257; bytes <= 4 * kib; bytes += 17) {
    void* const p = r.allocate(bytes, 8);
    fill_pattern(p, bytes, bytes);
    CHECK(r.stats().large_live_blocks == 1);
    CHECK(check_pattern(p, bytes, bytes));
    r.deallocate(p, bytes, 8);
  }
  const size_class_stats after = r.stats();
  CHECK(after.large_live_blocks == 0);
  CHECK(after.large_unknown_deallocations == 0);
  for (const std::size_t bytes : whole_sizes) {
    CHECK(whole_of(after, bytes).cached_blocks == whole_of(cached, bytes).cached_blocks);
    // What the cache holds is still a whole chunk of that size, aligned to it.
    void* const p = r.allocate(bytes, bytes);
    CHECK(reinterpret_cast<std::uintptr_t>(p) % bytes == 0);
    r.deallocate(p, bytes, bytes);
  }
  r.release();
  CHECK(upstream.stats().bytes_in_use == 0);
}

TEMPLATE_TEST_CASE("size_class: whole chunks beyond max_retained go back to upstream",
                   "[size_class][whole_chunk]", size_class_resource, size_class_unsync_resource) {
  pmrkit::counting_resource upstream;
  size_class_options options = uncached();
  options.max_retained = 256 * kib;
  TestType r(options, &upstream);
  std::vector<void*> chunks;
  for (int i = 0; i < 16; ++i) chunks.push_back(r.allocate(64 * kib, 64 * kib));
  CHECK(upstream.stats().bytes_in_use >= 16 * 64 * kib);
  for (void* p : chunks) r.deallocate(p, 64 * kib, 64 * kib);
  CHECK(r.stats().empty_chunk_bytes == 256 * kib);
  CHECK(upstream.stats().bytes_in_use == 256 * kib);
  CHECK(r.stats().bytes_from_upstream == 256 * kib);
  // Whole chunks still out when the resource releases are returned with the rest.
  chunks.assign({r.allocate(64 * kib, 64 * kib), r.allocate(128 * kib, 128 * kib)});
  r.release();
  CHECK(upstream.stats().bytes_in_use == 0);
  CHECK(whole_held(r.stats()) == 0);
}

TEMPLATE_TEST_CASE("size_class: a request arena over a size_class holds its chunks whole",
                   "[size_class][whole_chunk]", size_class_resource, size_class_unsync_resource) {
  pmrkit::counting_resource upstream;
  size_class_resource pool({}, &upstream);
  const auto request = [&] {
    TestType arena({}, &pool);
    struct block {
      void* address;
      std::size_t size;
    };
    std::vector<block> blocks;
    // 2 MiB in blocks of classes whose chunks are 8, 16, 32 and 64 KiB.
    for (int i = 0; i < 2048; ++i) {
      for (const std::size_t size : {64, 128, 256, 640})
        blocks.push_back({arena.allocate(size, 8), size});
    }
    const size_class_stats a = arena.stats();
    const size_class_stats p = pool.stats();
    // Every chunk of the arena is a whole chunk of the pool, none a block of a pool class of
    // 8 KiB and up (each of which loses an eighth of its chunk to the header).
    std::uint64_t arena_chunks = 0;
    for (const auto& c : a.classes) arena_chunks += c.chunks;
    std::uint64_t pool_whole_live = 0;
    for (const auto& c : p.whole_chunks) pool_whole_live += c.live_blocks;
    CHECK(pool_whole_live == arena_chunks);
    for (const auto& c : p.classes) {
      if (c.block_size >= 8 * kib) CHECK(c.chunks == 0);
    }
    // So the pool holds the arena's chunks and little more: its own classes serve only the
    // arena's small bookkeeping (its caches' slots), and its cache the chunks of the last
    // request.
    CHECK(p.bytes_from_upstream < a.bytes_from_upstream + 400 * kib);
    for (const block& b : blocks) arena.deallocate(b.address, b.size, 8);
  };
  // The second request also finds the first arena's slot arrays in the pool's cache, each
  // pinning a chunk of its class (about 300 KiB here); from then on the pool is warm.
  request();
  request();
  const auto peak = pool.stats().peak_bytes_from_upstream;
  // The arena's chunks came back to the pool, and the next requests' arenas take them again:
  // the pool holds no more than it did.
  for (const auto& c : pool.stats().whole_chunks) CHECK(c.live_blocks == 0);
  request();
  request();
  CHECK(pool.stats().peak_bytes_from_upstream == peak);
}

TEST_CASE("size_class: whole chunks freed on other threads, and threads that exit",
          "[size_class][whole_chunk][threads]") {
  pmrkit::counting_resource upstream;
  {
    size_class_resource pool({}, &upstream);
    std::vector<void*> chunks;
    for (int i = 0; i < 32; ++i) chunks.push_back(pool.allocate(16 * kib, 16 * kib));
    std::vector<std::thread> threads;
    for (int t = 0; t < 4; ++t) {
      threads.emplace_back([&, t] {
        // Each frees a quarter of the main thread's chunks, then runs arenas of its own.
        for (int i = t; i < 32; i += 4) pool.deallocate(chunks[i], 16 * kib, 16 * kib);
        for (int op = 0; op < 20; ++op) {
          size_class_unsync_resource arena({}, &pool);
          std::vector<void*> blocks;
          for (int i = 0; i < 1000; ++i) blocks.push_back(arena.allocate(96, 8));
          for (void* p : blocks) arena.deallocate(p, 96, 8);
        }
      });
    }
    for (auto& t : threads) t.join();
    // The threads' caches went back when they exited.
    const size_class_stats s = pool.stats();
    CHECK(whole_held(s) == 0);
    for (const auto& c : s.whole_chunks) CHECK(c.deallocations == c.allocations);
    pool.trim();
    CHECK(upstream.stats().bytes_in_use == pool.stats().cache_slot_bytes);
  }
  CHECK(upstream.stats().bytes_in_use == 0);
}

TEMPLATE_TEST_CASE("size_class: every upstream allocation of the whole-chunk path can fail cleanly",
                   "[size_class][whole_chunk]", size_class_resource, size_class_unsync_resource) {
  constexpr int many = 100;  // enough to make the table that records them grow a few times
  const auto allocate_chunks = [](TestType& r) {
    std::vector<void*> chunks;
    for (int i = 0; i < many; ++i) chunks.push_back(r.allocate(16 * kib, 16 * kib));
    return chunks;
  };
  const auto deallocate_chunks = [](TestType& r, const std::vector<void*>& chunks) {
    for (void* p : chunks) r.deallocate(p, 16 * kib, 16 * kib);
  };
  const auto result = pmrkit::testing::failure_sweep(
      [](std::pmr::memory_resource& memory) {
        return std::make_unique<TestType>(uncached(), &memory);
      },
      [&](std::unique_ptr<TestType>& r) { deallocate_chunks(*r, allocate_chunks(*r)); },
      [&](std::unique_ptr<TestType>& r) {
        // Chunks the failed operation had taken stay out until the resource goes.
        const auto live = whole_of(r->stats(), 16 * kib).live_blocks;
        const std::vector<void*> chunks{r->allocate(16 * kib, 16 * kib)};
        CHECK(whole_of(r->stats(), 16 * kib).live_blocks == live + 1);
        deallocate_chunks(*r, chunks);
        CHECK(whole_of(r->stats(), 16 * kib).live_blocks == live);
      });
  CHECK(result.allocations > many);  // the chunks, and the memory that records them
  CHECK(result.surfaced == result.steps - 1);
}

// Debug builds assert on such a free instead; the count is what release builds show.
#ifdef NDEBUG
TEMPLATE_TEST_CASE("size_class: a whole chunk the resource does not hold is counted, not kept",
                   "[size_class][whole_chunk]", size_class_resource, size_class_unsync_resource) {
  pmrkit::counting_resource upstream;
  TestType r(uncached(), &upstream);
  TestType other(uncached(), &upstream);
  void* foreign = other.allocate(16 * kib, 16 * kib);
  r.deallocate(foreign, 16 * kib, 16 * kib);
  CHECK(r.stats().large_unknown_deallocations == 1);
  CHECK(r.stats().empty_chunk_bytes == 0);  // not taken in as an empty chunk
  CHECK(whole_of(other.stats(), 16 * kib).live_blocks == 1);
  other.deallocate(foreign, 16 * kib, 16 * kib);

  void* mine = r.allocate(16 * kib, 16 * kib);
  r.deallocate(mine, 16 * kib, 16 * kib);
  r.deallocate(mine, 16 * kib, 16 * kib);  // freed twice
  CHECK(r.stats().large_unknown_deallocations == 2);
  CHECK(r.stats().empty_chunk_bytes == 16 * kib);  // kept once
}
#endif
