// aligned_pool_resource over both standard pools: every alignment honoured (libstdc++'s pools
// pick blocks by size alone), freed blocks reused, chunks from upstream and back on release(),
// and an upstream failure reported as std::bad_alloc (libstdc++ swallows it on its own).
#include "pmrkit/aligned_pool_resource.hpp"

#include <catch2/catch.hpp>
#include <cstddef>
#include <atomic>
#include <new>
#include <thread>
#include <utility>
#include <vector>

#include "pmrkit/counting_resource.hpp"
#include "test_resources.hpp"

TEMPLATE_TEST_CASE("aligned_pool: every block is aligned as asked and blocks do not overlap",
                   "[aligned_pool]", pmrkit::aligned_sync_pool_resource,
                   pmrkit::aligned_unsync_pool_resource) {
  TestType pool({}, std::pmr::new_delete_resource());
  pmrkit::test::check_alignment_and_overlap(pool, {1, 8, 24, 40, 100, 1000, 70000}, 4096);
}

TEMPLATE_TEST_CASE("aligned_pool: a freed block is reused without asking upstream",
                   "[aligned_pool]", pmrkit::aligned_sync_pool_resource,
                   pmrkit::aligned_unsync_pool_resource) {
  pmrkit::counting_resource upstream(std::pmr::new_delete_resource());
  TestType pool({}, &upstream);
  for (std::size_t alignment : {8u, 64u}) {
    void* a = pool.allocate(48, alignment);
    const auto upstream_calls = upstream.stats().allocations;
    pool.deallocate(a, 48, alignment);
    void* again = pool.allocate(48, alignment);
    CHECK(again == a);
    CHECK(upstream.stats().allocations == upstream_calls);
    pool.deallocate(again, 48, alignment);
  }
}

TEMPLATE_TEST_CASE("aligned_pool: chunks come from upstream and go back on release()",
                   "[aligned_pool]", pmrkit::aligned_sync_pool_resource,
                   pmrkit::aligned_unsync_pool_resource) {
  pmrkit::counting_resource upstream(std::pmr::new_delete_resource());
  TestType pool({}, &upstream);
  CHECK(pool.upstream_resource() == &upstream);
  for (int i = 0; i < 1000; ++i) (void)pool.allocate(64, 16);  // left allocated on purpose
  (void)pool.allocate(1 << 20, 4096);                          // larger than any pool
  CHECK(upstream.stats().bytes_in_use > 1000u * 64 + (1u << 20));
  pool.release();
  CHECK(upstream.stats().bytes_in_use == 0);
  pmrkit::test::check_usable(pool, 64, 16);  // after release() too
}

TEMPLATE_TEST_CASE("aligned_pool: an upstream failure is std::bad_alloc and the pool recovers",
                   "[aligned_pool]", pmrkit::aligned_sync_pool_resource,
                   pmrkit::aligned_unsync_pool_resource) {
  pmrkit::test::failing_resource upstream(std::pmr::new_delete_resource());
  pmrkit::counting_resource counted(&upstream);
  {
    TestType pool({}, &counted);
    // Every step of a first chunk's setup fails in turn: upstream's n-th call.
    for (std::size_t allowed = 0; allowed < 4; ++allowed) {
      CAPTURE(allowed);
      upstream.allow(allowed);
      try {
        void* p = pool.allocate(32, 8);
        pool.deallocate(p, 32, 8);
      } catch (const std::bad_alloc&) {
        CHECK(upstream.failures() > 0);
      }
    }
    upstream.allow(0);
    CHECK_THROWS_AS(pool.allocate(1 << 20, 8), std::bad_alloc);
    upstream.allow_all();
    pmrkit::test::check_usable(pool, 32, 8);
  }
  CHECK(counted.stats().bytes_in_use == 0);
}

namespace {

// Refuses the small requests a pool's chunk list grows by (libstdc++ 12: 192 bytes for a
// list's first storage) while `refusing`, and every request while `refusing_all`.
struct list_refusing {
  bool refusing = true;
  std::atomic<bool> refusing_all{false};
  pmrkit::test::refusing_resource upstream{[this](std::size_t bytes, std::size_t) {
    return refusing_all.load() || (refusing && bytes <= 512);
  }};
};

}  // namespace

TEMPLATE_TEST_CASE("aligned_pool: many size classes failing their first chunk list are bad_alloc",
                   "[aligned_pool]", pmrkit::aligned_sync_pool_resource,
                   pmrkit::aligned_unsync_pool_resource) {
  // Each size class whose first chunk list cannot grow needs the reserve's stand-in storage;
  // more classes than the eight slots in the object used to reach libstdc++'s defect (a crash).
  // A size that shares a pool with one that failed before, or one past the pools, is served.
  list_refusing refusal;
  pmrkit::counting_resource counted(&refusal.upstream);
  {
    std::pmr::pool_options options;
    options.largest_required_pool_block = 1 << 20;
    TestType pool(options, &counted);
    std::vector<std::pair<void*, std::size_t>> served;
    std::size_t refused = 0;
    for (std::size_t bytes = 8; bytes <= (1 << 20); bytes = bytes < 128 ? bytes + 8 : bytes * 2) {
      try {
        served.emplace_back(pool.allocate(bytes, 8), bytes);
      } catch (const std::bad_alloc&) {
        ++refused;
      }
    }
    CHECK(refused > 8);
    for (const auto& [p, bytes] : served) pool.deallocate(p, bytes, 8);
    refusal.refusing = false;
    pmrkit::test::check_usable(pool, 48, 8);
    pmrkit::test::check_usable(pool, 4096, 8);
  }
  CHECK(counted.stats().bytes_in_use == 0);
}

TEST_CASE("aligned_pool: a thread that exits while upstream fails does not end the process",
          "[aligned_pool]") {
  // At thread exit libstdc++ moves the thread's chunks into the shared pools, asking upstream
  // for list storage in a function that cannot throw: a failure there called std::terminate.
  list_refusing refusal;
  refusal.refusing = false;
  pmrkit::counting_resource counted(&refusal.upstream);
  {
    pmrkit::aligned_sync_pool_resource pool({}, &counted);
    void* kept = nullptr;
    std::thread([&] {
      kept = pool.allocate(8, 8);
      refusal.refusing_all = true;
    }).join();
    refusal.refusing_all = false;
    pool.deallocate(kept, 8, 8);
    pmrkit::test::check_usable(pool, 8, 8);
  }
  CHECK(counted.stats().bytes_in_use == 0);
}
