// boost_pool_resource: blocks by power-of-two class from Boost.Pool chunks taken from upstream,
// larger or over-aligned requests straight to upstream, and trim() giving back empty chunks.
#include <catch2/catch.hpp>
#include <cstddef>
#include <cstdint>
#include <new>
#include <stdexcept>
#include <string>
#include <vector>

#include "pmrkit/boost_pool_resource.hpp"
#include "pmrkit/counting_resource.hpp"
#include "test_resources.hpp"


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

TEST_CASE("boost_pool: blocks are aligned as asked, up to 64 pooled and beyond via upstream",
          "[boost_pool]") {
  pmrkit::counting_resource upstream(std::pmr::new_delete_resource());
  pmrkit::boost_pool_resource pool({}, &upstream);
  pmrkit::test::check_alignment_and_overlap(pool, {1, 7, 24, 100, 1000, 5000}, 4096);
}

TEST_CASE("boost_pool: a freed block is the next one of its class", "[boost_pool]") {
  pmrkit::counting_resource upstream(std::pmr::new_delete_resource());
  pmrkit::boost_pool_resource pool({}, &upstream);
  void* a = pool.allocate(40, 8);  // the 64-byte class
  void* b = pool.allocate(40, 8);
  const auto upstream_calls = upstream.stats().allocations;
  pool.deallocate(a, 40, 8);
  CHECK(pool.allocate(64, 8) == a);  // same class, reused without asking upstream
  CHECK(upstream.stats().allocations == upstream_calls);
  pool.deallocate(a, 64, 8);
  pool.deallocate(b, 40, 8);
}

TEST_CASE("boost_pool: chunks and large blocks come from upstream and all go back",
          "[boost_pool]") {
  pmrkit::counting_resource upstream(std::pmr::new_delete_resource());
  {
    pmrkit::boost_pool_options o;
    o.max_pooled = 1024;
    pmrkit::boost_pool_resource pool(o, &upstream);
    CHECK(upstream.stats().allocations == 0);  // nothing until the first request
    (void)pool.allocate(16, 8);
    CHECK(upstream.stats().allocations == 1);  // the 16-byte class's first chunk
    const auto before = upstream.stats();
    void* large = pool.allocate(2000, 8);  // above max_pooled: straight to upstream
    CHECK(upstream.stats().allocations == before.allocations + 1);
    CHECK(upstream.stats().bytes_in_use >= before.bytes_in_use + 2000);
    pool.deallocate(large, 2000, 8);
    CHECK(upstream.stats().bytes_in_use == before.bytes_in_use);
    (void)pool.allocate(3000, 8);  // still allocated when the pool goes
  }
  CHECK(upstream.stats().bytes_in_use == 0);
  CHECK(upstream.stats().blocks_in_use() == 0);
}

TEST_CASE("boost_pool: an upstream failure is std::bad_alloc and the pool stays usable",
          "[boost_pool]") {
  pmrkit::test::failing_resource upstream(std::pmr::new_delete_resource(), 0);
  pmrkit::counting_resource counted(&upstream);
  {
    pmrkit::boost_pool_resource pool({}, &counted);
    CHECK_THROWS_AS(pool.allocate(32, 8), std::bad_alloc);       // a chunk
    CHECK_THROWS_AS(pool.allocate(1 << 20, 8), std::bad_alloc);  // a large block
    CHECK(counted.stats().allocations == 0);
    upstream.allow_all();
    pmrkit::test::check_usable(pool, 32, 8);
  }
  CHECK(counted.stats().bytes_in_use == 0);
}

TEST_CASE("boost_pool: options outside their ranges are rejected with what is allowed",
          "[boost_pool]") {
  // Made directly, not through the registry, the constructor is the only check: a max_pooled
  // of 2^63 used to double past the largest size_t and divide by zero.
  const auto rejected = [](auto change) {
    pmrkit::boost_pool_options options;
    change(options);
    return options;
  };
  const auto message_of = [](const pmrkit::boost_pool_options& options) -> std::string {
    try {
      pmrkit::boost_pool_resource pool(options, std::pmr::new_delete_resource());
    } catch (const std::invalid_argument& e) {
      return e.what();
    }
    return "accepted";
  };
  CHECK_THAT(message_of(rejected([](auto& o) { o.max_pooled = 100; })),
             Catch::Contains("max_pooled is 100; allowed: a power of two from 8 to 1048576"));
  CHECK_THAT(message_of(rejected([](auto& o) { o.max_pooled = 0; })),
             Catch::Contains("max_pooled is 0"));
  CHECK_THAT(message_of(rejected([](auto& o) { o.max_pooled = std::size_t{1} << 63; })),
             Catch::Contains("max_pooled"));
  CHECK_THAT(message_of(rejected([](auto& o) { o.chunk_size = 8; })),
             Catch::Contains("chunk_size is 8; allowed: 64 to 1073741824"));
  CHECK_THAT(message_of(rejected([](auto& o) { o.max_chunk_size = 1024; })),
             Catch::Contains("max_chunk_size 1024 is below chunk_size 65536"));
  CHECK(message_of({}) == "accepted");
  CHECK_THROWS_AS(pmrkit::boost_pool_resource({}, nullptr), std::invalid_argument);
}

TEST_CASE("boost_pool: a zero-byte block from upstream lies inside what upstream gave",
          "[boost_pool]") {
  // Aligned beyond 64, it goes straight to upstream behind a header; with no byte of its own
  // it used to point at the end of upstream's block, where another block may begin.
  struct last_block_resource final : std::pmr::memory_resource {
    std::byte* start = nullptr;
    std::size_t bytes = 0;
    void* do_allocate(std::size_t n, std::size_t alignment) override {
      bytes = n;
      start = static_cast<std::byte*>(std::pmr::new_delete_resource()->allocate(n, alignment));
      return start;
    }
    void do_deallocate(void* p, std::size_t n, std::size_t alignment) override {
      std::pmr::new_delete_resource()->deallocate(p, n, alignment);
    }
    bool do_is_equal(const std::pmr::memory_resource& other) const noexcept override {
      return this == &other;
    }
  } upstream;
  pmrkit::boost_pool_resource pool({}, &upstream);
  auto* p = static_cast<std::byte*>(pool.allocate(0, 128));
  CHECK(p >= upstream.start);
  CHECK(p < upstream.start + upstream.bytes);
  CHECK(reinterpret_cast<std::uintptr_t>(p) % 128 == 0);
  pool.deallocate(p, 0, 128);
}
