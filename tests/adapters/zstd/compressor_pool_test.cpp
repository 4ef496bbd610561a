// compressor_pool: contexts are reused rather than rebuilt, at most max_idle are kept, trim()
// gives their memory back, and many threads compressing through one pool get correct frames.
#include <catch2/catch.hpp>

#include <atomic>
#include <new>
#include <thread>
#include <vector>

#include "pmrkit/buffer_pool.hpp"
#include "pmrkit/counting_resource.hpp"
#include "pmrkit/zstd/compressor.hpp"
#include "pmrkit/zstd/decompressor.hpp"
#include "test_resources.hpp"
#include "zstd_test_support.hpp"

using pmrkit::zstd::compressor_pool;
using bytes = std::vector<std::byte>;

TEST_CASE("a context that could not be built is not counted as created", "[zstd][pool]") {
  pmrkit::test::failing_resource failing(std::pmr::new_delete_resource());
  compressor_pool pool(&failing, {}, 2);
  failing.allow(0);  // every context from now on fails to be built
  for (int i = 0; i < 3; ++i) CHECK_THROWS_AS(pool.acquire(), std::bad_alloc);
  CHECK(pool.stats().created == 0);
  failing.allow_all();
  { auto lease = pool.acquire(); }
  CHECK(pool.stats().created == 1);
}

TEST_CASE("a pool reuses its contexts and keeps at most max_idle", "[zstd][pool]") {
  pmrkit::counting_resource counted(std::pmr::new_delete_resource());
  {
    compressor_pool pool(&counted, {}, 2);
    const bytes input = pmrkit::zstd::test::payload(10'000);
    pmrkit::byte_buffer out(std::pmr::new_delete_resource());
    pool.compress(input, out);
    const auto allocations = counted.stats().allocations;
    for (int i = 0; i < 20; ++i) {
      out.clear();
      pool.compress(input, out);
    }
    CHECK(counted.stats().allocations == allocations);  // no context built after the first
    auto s = pool.stats();
    CHECK(s.created == 1);
    CHECK(s.reused == 20);
    CHECK(s.idle == 1);

    {
      auto a = pool.acquire();
      auto b = pool.acquire();
      auto c = pool.acquire();
      auto moved = std::move(c);  // a moved lease returns its context once, not twice
      CHECK(pool.stats().created == 3);
    }
    s = pool.stats();
    CHECK(s.idle == 2);
    CHECK(s.dropped == 1);
    CHECK(s.idle_memory_bytes == 2 * pmrkit::zstd::compressor::memory_bound(pool.options()));
    pool.trim();
    CHECK(pool.stats().idle == 0);
  }
  CHECK(counted.stats().bytes_in_use == 0);
}

TEST_CASE("a compressor moved out of a lease is the caller's; the pool keeps none in its place",
          "[zstd][pool]") {
  pmrkit::counting_resource counted(std::pmr::new_delete_resource());
  pmrkit::counting_resource other(std::pmr::new_delete_resource());
  {
    compressor_pool pool(&counted, {}, 2);
    const bytes input = pmrkit::zstd::test::payload(10'000);
    pmrkit::byte_buffer out(std::pmr::new_delete_resource());
    pmrkit::zstd::compressor mine = [&] {
      auto lease = pool.acquire();
      return std::move(*lease);
    }();
    // The pool kept the moved-from shell and handed it out, which threw "used after a move".
    CHECK(pool.stats().idle == 0);
    CHECK(pool.compress(input, out) > 0);
    CHECK(mine.compress(input, out) > 0);
    // Nor a compressor on another resource or with other options, assigned into a lease.
    { *pool.acquire() = pmrkit::zstd::compressor(&other); }
    { *pool.acquire() = pmrkit::zstd::compressor(&counted, {.level = 9}); }
    CHECK(other.stats().bytes_in_use == 0);
    CHECK(pool.stats().idle == 0);  // neither was kept
    CHECK(pool.compress(input, out) > 0);
    const auto s = pool.stats();
    CHECK(s.idle == 1);
    CHECK(s.idle_memory_bytes == pmrkit::zstd::compressor::memory_bound(pool.options()));
    CHECK(pool.acquire()->options() == pool.options());
  }
  CHECK(counted.stats().bytes_in_use == 0);
}

TEST_CASE("threads share one pool and one buffer pool", "[zstd][pool][concurrent]") {
  pmrkit::counting_resource counted(std::pmr::new_delete_resource());
  std::atomic<int> wrong{0};
  {
    pmrkit::buffer_pool buffers(&counted);
    compressor_pool pool(&counted, {.level = 1}, 2);
    std::vector<std::thread> threads;
    for (int t = 0; t < 4; ++t) {
      threads.emplace_back([&, t] {
        pmrkit::zstd::decompressor d(&counted);
        for (int i = 0; i < 40; ++i) {
          const bytes input = pmrkit::zstd::test::payload(1000 + 100 * i, static_cast<unsigned>(t));
          pmrkit::byte_buffer frame = buffers.acquire();
          pool.compress(input, frame);
          pmrkit::byte_buffer plain = buffers.acquire();
          d.decompress(frame.span(), plain);
          if (bytes(plain.data(), plain.data() + plain.size()) != input) ++wrong;
        }
      });
    }
    for (auto& th : threads) th.join();
    CHECK(pool.stats().idle <= 2);
  }
  CHECK(wrong.load() == 0);
  CHECK(counted.stats().bytes_in_use == 0);
}

TEST_CASE("pool options are checked up front", "[zstd][pool]") {
  CHECK_THROWS_AS(compressor_pool(std::pmr::new_delete_resource(), {.window_log = 5}),
                  std::invalid_argument);
  CHECK_THROWS_AS(compressor_pool(std::pmr::new_delete_resource(), {}, 100000),
                  std::invalid_argument);
}
