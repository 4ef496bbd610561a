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
#include "block_mailbox.hpp"
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

using pmrkit::test::block_mailbox;
using pmrkit::test::handed_block;

}  // namespace

TEST_CASE("checked: threads allocating and freeing each other's blocks", "[checked][concurrent]") {
  pmrkit::counting_resource upstream(std::pmr::new_delete_resource());
  std::atomic<int> corrupted{0};
  std::atomic<int> errors{0};
  {
    checked_resource r(throwing(), &upstream);
    constexpr int threads = 4;
    std::vector<block_mailbox> boxes(threads);
    std::vector<std::thread> workers;
    for (int t = 0; t < threads; ++t)
      workers.emplace_back([&, t] {
        std::mt19937 rng(static_cast<unsigned>(t) + 11);
        std::uniform_int_distribution<std::size_t> size(0, 2000);
        std::vector<handed_block> mine;
        std::uint64_t seed = static_cast<std::uint64_t>(t) << 40;
        const auto release = [&](const handed_block& b) {
          if (!pmrkit::test::check_pattern(b.p, b.bytes, b.seed)) ++corrupted;
          try {
            r.deallocate(b.p, b.bytes, 16);
          } catch (const allocation_error&) {
            ++errors;
          }
        };
        for (int i = 0; i < 5000; ++i) {
          const std::size_t bytes = size(rng);
          void* p = r.allocate(bytes, 16);
          pmrkit::test::fill_pattern(p, bytes, ++seed);
          if (i % 3 == 0)
            boxes[static_cast<std::size_t>((t + 1) % threads)].put({p, bytes, seed});
          else
            mine.push_back({p, bytes, seed});
          handed_block incoming;
          if (boxes[static_cast<std::size_t>(t)].take(incoming)) release(incoming);
          if (mine.size() > 32) {
            release(mine.front());
            mine.erase(mine.begin());
          }
        }
        for (const auto& b : mine) release(b);
      });
    for (auto& w : workers) w.join();
    for (auto& box : boxes) {
      handed_block b;
      while (box.take(b)) r.deallocate(b.p, b.bytes, 16);
    }
    const auto s = r.stats();
    CHECK(s.allocations == 4 * 5000);
    CHECK(s.deallocations == 4 * 5000);
    CHECK(s.blocks_in_use == 0);
    CHECK(s.bytes_in_use == 0);
    CHECK(s.violations == 0);
    CHECK(s.reused_from_quarantine > 0);
    REQUIRE_NOTHROW(r.verify());
  }
  CHECK(corrupted.load() == 0);
  CHECK(errors.load() == 0);
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
