// checked_resource from several threads at once: cross-thread frees stay clean and exact, and
// two threads racing to free the same block produce exactly one success and one double free.
#include <atomic>
#include <catch2/catch.hpp>
#include <cstdint>
#include <latch>
#include <random>
#include <thread>
#include <vector>

#include "pmrkit/checked_resource.hpp"
#include "pmrkit/counting_resource.hpp"
#include "cross_thread_churn.hpp"
#include "test_resources.hpp"

using pmrkit::allocation_error;
using pmrkit::allocation_violation;
using pmrkit::checked_options;
using pmrkit::checked_resource;

namespace {

checked_options throwing() {
  checked_options o;
  o.on_error = checked_options::error_action::throw_error;
  o.quarantine_blocks = 256;
  return o;
}

using pmrkit::test::handed_block;

}  // namespace

TEST_CASE("checked: threads allocating and freeing each other's blocks", "[checked][concurrent]") {
  pmrkit::counting_resource upstream(std::pmr::new_delete_resource());
  int corrupted = 0;
  std::atomic<int> free_errors{0};
  {
    checked_resource r(throwing(), &upstream);
    pmrkit::test::churn_plan plan;
    plan.min_bytes = 0;
    plan.max_bytes = 2000;
    plan.keep = 32;
    plan.seed_base = 11;
    corrupted = pmrkit::test::cross_thread_churn(r, plan, [&](const handed_block& b) {
      try {
        r.deallocate(b.p, b.bytes, pmrkit::test::churn_alignment);
      } catch (const allocation_error&) {
        ++free_errors;
      }
    });
    const auto s = r.stats();
    CHECK(s.allocations == 4 * 5000);
    CHECK(s.deallocations == 4 * 5000);
    CHECK(s.blocks_in_use == 0);
    CHECK(s.bytes_in_use == 0);
    CHECK(s.violations == 0);
    CHECK(s.reused_from_quarantine > 0);
    REQUIRE_NOTHROW(r.verify());
  }
  CHECK(corrupted == 0);
  CHECK(free_errors.load() == 0);
  CHECK(upstream.stats().bytes_in_use == 0);
}

TEST_CASE("checked: two threads freeing one block: one frees it, the other is told",
          "[checked][concurrent]") {
  checked_resource r(throwing());
  for (int round = 0; round < 200; ++round) {
    void* p = r.allocate(64, 8);
    std::atomic<int> freed{0};
    std::atomic<int> double_frees{0};
    std::latch start(2);
    const auto racer = [&] {
      start.arrive_and_wait();
      try {
        r.deallocate(p, 64, 8);
        ++freed;
      } catch (const allocation_error& e) {
        if (e.violation() == allocation_violation::double_free ||
            e.violation() == allocation_violation::unknown_pointer)
          ++double_frees;
      }
    };
    std::thread a(racer);
    std::thread b(racer);
    a.join();
    b.join();
    REQUIRE(freed.load() == 1);
    REQUIRE(double_frees.load() == 1);
  }
  CHECK(r.stats().violations == 200);
  CHECK(r.stats().blocks_in_use == 0);
}
