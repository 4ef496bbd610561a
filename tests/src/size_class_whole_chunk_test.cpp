// size_class's whole chunks: a request shaped as a chunk (a power of two from 8 KiB, aligned to
// its size), which is what a pool over a size_class asks for its own chunks, takes a whole
// chunk and goes back among the empty chunks, so a request arena over a long-lived pool holds
// what it would over new_delete rather than 1.35-1.58x its live bytes.
#include <catch2/catch.hpp>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <vector>

#include "pmrkit/counting_resource.hpp"
#include "pmrkit/size_class_resource.hpp"
#include "pmrkit/testing/failure_sweep.hpp"

using pmrkit::size_class_options;
using pmrkit::size_class_resource;
using pmrkit::size_class_stats;
using pmrkit::size_class_unsync_resource;

namespace {

constexpr std::size_t kib = 1024;

// The pool's class of exactly `size` bytes.
const size_class_stats::size_class& class_of(const size_class_stats& stats, std::size_t size) {
  for (const auto& c : stats.classes)
    if (c.block_size == size) return c;
  FAIL("no class of " << size << " bytes");
  return stats.classes.front();
}

std::uint64_t whole_chunks_out(const size_class_stats& stats) {
  return stats.whole_chunk_allocations - stats.whole_chunk_deallocations;
}

}  // namespace

TEMPLATE_TEST_CASE("size_class: a request shaped as a chunk takes a whole chunk and comes back "
                   "among the empty ones", "[size_class][whole_chunk]", size_class_resource,
                   size_class_unsync_resource) {
  pmrkit::counting_resource upstream;
  TestType r({}, &upstream);

  void* chunk = r.allocate(64 * kib, 64 * kib);
  CHECK(reinterpret_cast<std::uintptr_t>(chunk) % (64 * kib) == 0);
  // One upstream request of its own size besides the small table that tracks blocks out of the
  // classes, and no class holds it (the class of 64 KiB blocks would have taken a 512 KiB chunk
  // of seven).
  const std::uint64_t table = r.stats().bytes_from_upstream - 64 * kib;
  CHECK(table < 4 * kib);
  CHECK(upstream.stats().bytes_in_use == 64 * kib + table);
  CHECK(r.stats().whole_chunk_allocations == 1);
  CHECK(r.stats().large_allocations == 0);
  CHECK(r.stats().large_live_blocks == 0);
  CHECK(class_of(r.stats(), 64 * kib).chunks == 0);

  // Back among the empty chunks, still held; the next such request takes it again.
  r.deallocate(chunk, 64 * kib, 64 * kib);
  CHECK(r.stats().empty_chunk_bytes == 64 * kib);
  CHECK(upstream.stats().bytes_in_use == 64 * kib + table);
  const auto upstream_calls = upstream.stats().allocations;
  void* again = r.allocate(64 * kib, 64 * kib);
  CHECK(again == chunk);
  CHECK(upstream.stats().allocations == upstream_calls);
  r.deallocate(again, 64 * kib, 64 * kib);

  // A class whose chunks are 64 KiB (384-byte blocks) takes it too: the memory an arena gave
  // back serves any class of its size. Upstream gives only the thread cache's slots.
  REQUIRE(class_of(r.stats(), 384).chunk_bytes == 64 * kib);
  void* block = r.allocate(384, 8);
  const auto at = reinterpret_cast<std::uintptr_t>(block);
  CHECK(at - reinterpret_cast<std::uintptr_t>(chunk) < 64 * kib);
  CHECK(r.stats().empty_chunk_bytes == 0);
  CHECK(upstream.stats().bytes_in_use < 64 * kib + table + 4 * kib);
  r.deallocate(block, 384, 8);

  r.release();
  CHECK(upstream.stats().bytes_in_use == 0);
}

TEMPLATE_TEST_CASE("size_class: only chunk-shaped requests from 8 KiB take whole chunks",
                   "[size_class][whole_chunk]", size_class_resource, size_class_unsync_resource) {
  pmrkit::counting_resource upstream;
  TestType r({}, &upstream);
  struct request {
    std::size_t bytes, alignment;
  };
  // 4 KiB pages keep their class (and the thread's cache): a page buffer is a common request.
  // A size that is not its alignment, or an alignment below a page, is an ordinary block.
  for (const request q : {request{4 * kib, 4 * kib}, request{8 * kib, 16}, request{8 * kib, 4 * kib},
                          request{4 * kib, 8 * kib}, request{24 * kib, 8 * kib}}) {
    void* p = r.allocate(q.bytes, q.alignment);
    CHECK(reinterpret_cast<std::uintptr_t>(p) % q.alignment == 0);
    CHECK(r.stats().whole_chunk_allocations == 0);
    r.deallocate(p, q.bytes, q.alignment);
  }
  // From 8 KiB to 256 MiB, within max_pooled and beyond it.
  for (const std::size_t bytes : {8 * kib, 32 * kib, 128 * kib, 4096 * kib}) {
    const auto before = r.stats().whole_chunk_allocations;
    void* p = r.allocate(bytes, bytes);
    CHECK(reinterpret_cast<std::uintptr_t>(p) % bytes == 0);
    CHECK(r.stats().whole_chunk_allocations == before + 1);
    CHECK(r.stats().large_live_blocks == 0);
    r.deallocate(p, bytes, bytes);
  }
  CHECK(whole_chunks_out(r.stats()) == 0);
  r.release();
  CHECK(upstream.stats().bytes_in_use == 0);
}

TEMPLATE_TEST_CASE("size_class: whole chunks beyond max_retained go back to upstream",
                   "[size_class][whole_chunk]", size_class_resource, size_class_unsync_resource) {
  pmrkit::counting_resource upstream;
  size_class_options options;
  options.max_retained = 256 * kib;
  TestType r(options, &upstream);
  std::vector<void*> chunks;
  for (int i = 0; i < 16; ++i) chunks.push_back(r.allocate(64 * kib, 64 * kib));
  const std::uint64_t table = r.stats().bytes_from_upstream - 16 * 64 * kib;  // tracks them
  CHECK(table < 4 * kib);
  CHECK(upstream.stats().bytes_in_use == 16 * 64 * kib + table);
  for (void* p : chunks) r.deallocate(p, 64 * kib, 64 * kib);
  CHECK(r.stats().empty_chunk_bytes == 256 * kib);
  CHECK(upstream.stats().bytes_in_use == 256 * kib + table);
  CHECK(r.stats().bytes_from_upstream == 256 * kib + table);
  // Whole chunks still out when the resource goes are returned with the rest.
  chunks.assign({r.allocate(64 * kib, 64 * kib), r.allocate(128 * kib, 128 * kib)});
  r.release();
  CHECK(upstream.stats().bytes_in_use == 0);
  CHECK(whole_chunks_out(r.stats()) == 0);
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
    CHECK(whole_chunks_out(p) == arena_chunks);
    for (const auto& c : p.classes) {
      if (c.block_size >= 8 * kib) CHECK(c.chunks == 0);
    }
    // So the pool holds the arena's chunks and little more: its own classes serve only the
    // arena's small bookkeeping (its caches' slots).
    CHECK(p.bytes_from_upstream < a.bytes_from_upstream + 400 * kib);
    for (const block& b : blocks) arena.deallocate(b.address, b.size, 8);
  };
  request();
  const auto allocations = upstream.stats().allocations;
  // The arena's chunks came back to the pool (4 MiB kept by default), and the next request's
  // arena takes them again: nothing more from upstream.
  CHECK(whole_chunks_out(pool.stats()) == 0);
  CHECK(pool.stats().empty_chunk_bytes >= 2048 * kib);
  request();
  CHECK(upstream.stats().allocations == allocations);
}

TEMPLATE_TEST_CASE("size_class: every upstream allocation of the whole-chunk path can fail cleanly",
                   "[size_class][whole_chunk]", size_class_resource, size_class_unsync_resource) {
  constexpr int many = 100;  // enough to make the table that tracks them grow a few times
  const auto allocate_chunks = [](TestType& r) {
    std::vector<void*> chunks;
    for (int i = 0; i < many; ++i) chunks.push_back(r.allocate(16 * kib, 16 * kib));
    return chunks;
  };
  const auto deallocate_chunks = [](TestType& r, const std::vector<void*>& chunks) {
    for (void* p : chunks) r.deallocate(p, 16 * kib, 16 * kib);
  };
  const auto result = pmrkit::testing::failure_sweep(
      [](std::pmr::memory_resource& memory) { return std::make_unique<TestType>(size_class_options{}, &memory); },
      [&](std::unique_ptr<TestType>& r) { deallocate_chunks(*r, allocate_chunks(*r)); },
      [&](std::unique_ptr<TestType>& r) {
        // Chunks the failed operation had taken stay out until the resource goes.
        const auto out = whole_chunks_out(r->stats());
        const std::vector<void*> chunks{r->allocate(16 * kib, 16 * kib)};
        CHECK(whole_chunks_out(r->stats()) == out + 1);
        deallocate_chunks(*r, chunks);
        CHECK(whole_chunks_out(r->stats()) == out);
      });
  CHECK(result.allocations > many);  // the chunks, and the memory that tracks them
  CHECK(result.surfaced == result.steps - 1);
}

// Debug builds assert on such a free instead; the count is what release builds show.
#ifdef NDEBUG
TEMPLATE_TEST_CASE("size_class: a whole chunk the resource does not hold is counted, not kept",
                   "[size_class][whole_chunk]", size_class_resource, size_class_unsync_resource) {
  pmrkit::counting_resource upstream;
  TestType r({}, &upstream);
  TestType other({}, &upstream);
  void* foreign = other.allocate(16 * kib, 16 * kib);
  r.deallocate(foreign, 16 * kib, 16 * kib);
  CHECK(r.stats().large_unknown_deallocations == 1);
  CHECK(r.stats().empty_chunk_bytes == 0);  // not taken in as an empty chunk
  CHECK(whole_chunks_out(other.stats()) == 1);
  other.deallocate(foreign, 16 * kib, 16 * kib);

  void* mine = r.allocate(16 * kib, 16 * kib);
  r.deallocate(mine, 16 * kib, 16 * kib);
  r.deallocate(mine, 16 * kib, 16 * kib);  // freed twice
  CHECK(r.stats().large_unknown_deallocations == 2);
  CHECK(r.stats().empty_chunk_bytes == 16 * kib);  // kept once
}
#endif
