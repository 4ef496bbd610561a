// boost_pool_resource: blocks by power-of-two class from Boost.Pool chunks taken from upstream,
// larger or over-aligned requests straight to upstream, and trim() giving back empty chunks.
#include <catch2/catch.hpp>
#include <cstddef>
#include <vector>

#include "pmrkit/boost_pool_resource.hpp"
#include "pmrkit/counting_resource.hpp"

namespace {

// Small chunks, so a few hundred blocks span several of them.
pmrkit::boost_pool_options small_chunks() {
  pmrkit::boost_pool_options o;
  o.chunk_size = 1024;
  o.max_chunk_size = 4096;
  return o;
}

std::vector<void*> allocate_many(std::pmr::memory_resource& r, std::size_t count,
                                 std::size_t bytes) {
  std::vector<void*> blocks;
  for (std::size_t i = 0; i < count; ++i) blocks.push_back(r.allocate(bytes, 8));
  return blocks;
}

}  // namespace

TEST_CASE("boost_pool: trim() returns every chunk whose blocks are all free",
          "[boost_pool][trim]") {
  pmrkit::counting_resource upstream(std::pmr::new_delete_resource());
  pmrkit::boost_pool_resource pool(small_chunks(), &upstream);
  // Freed in allocation order, the opposite of address order within each chunk.
  for (void* p : allocate_many(pool, 600, 32)) pool.deallocate(p, 32, 8);
  REQUIRE(upstream.stats().blocks_in_use() > 2);  // several chunks, all of them empty now

  pool.trim();
  CHECK(upstream.stats().blocks_in_use() == 0);
  CHECK(upstream.stats().bytes_in_use == 0);
}

TEST_CASE("boost_pool: trim() keeps a chunk that still has a live block", "[boost_pool][trim]") {
  pmrkit::counting_resource upstream(std::pmr::new_delete_resource());
  pmrkit::boost_pool_resource pool(small_chunks(), &upstream);
  std::vector<void*> blocks = allocate_many(pool, 600, 64);
  void* const kept = blocks[300];
  for (void* p : blocks)
    if (p != kept) pool.deallocate(p, 64, 8);

  pool.trim();
  CHECK(upstream.stats().blocks_in_use() == 1);  // only the chunk that holds `kept`
  static_cast<std::byte*>(kept)[63] = std::byte{1};  // still ours to write

  // The pool stays usable after trim, and the next trim returns the last chunk.
  pool.deallocate(pool.allocate(64, 8), 64, 8);
  pool.deallocate(kept, 64, 8);
  pool.trim();
  CHECK(upstream.stats().bytes_in_use == 0);
}
