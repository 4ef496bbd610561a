// The conformance suite's concurrent part: every strategy whose strategy_info says thread_safe,
// hammered from several threads that also free each other's blocks.
#include <atomic>
#include <catch2/catch.hpp>
#include <random>
#include <thread>
#include <vector>

#include "block_mailbox.hpp"
#include "conformance.hpp"
#include "sanitizers.hpp"
#include "test_resources.hpp"

using pmrkit::test::block_mailbox;
using pmrkit::test::handed_block;

namespace {

// The strategies this test may run here. mimalloc is loaded uninstrumented: ThreadSanitizer
// cannot see the synchronisation inside it and reports its cross-thread reuse of a block as a
// race on the block's bytes, so under TSan it is left out (it runs in every other build).
std::vector<std::string> strategies_to_hammer() {
  std::vector<std::string> names;
  for (const auto& name : pmrkit::test::thread_safe_strategy_names())
    if (!(pmrkit::test::under_thread_sanitizer && name.rfind("mimalloc", 0) == 0))
      names.push_back(name);
  return names;
}

}  // namespace

TEST_CASE("thread-safe strategies: the registry offers some", "[conformance][concurrent]") {
  CHECK_FALSE(strategies_to_hammer().empty());
}

TEST_CASE("thread-safe strategies: concurrent allocate/free with cross-thread frees",
          "[conformance][concurrent]") {
  const std::string name = GENERATE(from_range(strategies_to_hammer()));
  CAPTURE(name);
  pmrkit::test::tracking_upstream upstream;
  std::atomic<int> corrupted{0};
  {
    auto r = pmrkit::make_resource(name, &upstream);
    constexpr int threads = 4;
    std::vector<block_mailbox> boxes(threads);
    std::vector<std::thread> workers;
    for (int t = 0; t < threads; ++t) {
      workers.emplace_back([&, t] {
        std::mt19937 rng(static_cast<unsigned>(t) + 1);
        std::uniform_int_distribution<std::size_t> size(1, 3000);
        std::vector<handed_block> mine;
        std::uint64_t seed = static_cast<std::uint64_t>(t) << 40;
        const auto release = [&](const handed_block& b) {
          if (!pmrkit::test::check_pattern(b.p, b.bytes, b.seed)) ++corrupted;
          r->deallocate(b.p, b.bytes, 16);
        };
        for (int i = 0; i < 20000; ++i) {
          const std::size_t bytes = size(rng);
          void* p = r->allocate(bytes, 16);
          pmrkit::test::fill_pattern(p, bytes, ++seed);
          const handed_block b{p, bytes, seed};
          if (i % 3 == 0) {
            boxes[static_cast<std::size_t>((t + 1) % threads)].put(b);  // the next thread frees it
          } else {
            mine.push_back(b);
          }
          handed_block incoming;
          if (boxes[static_cast<std::size_t>(t)].take(incoming)) release(incoming);
          if (mine.size() > 64) {
            release(mine.front());
            mine.erase(mine.begin());
          }
        }
        for (const auto& b : mine) release(b);
      });
    }
    for (auto& w : workers) w.join();
    for (auto& box : boxes) {
      handed_block b;
      while (box.take(b)) {
        if (!pmrkit::test::check_pattern(b.p, b.bytes, b.seed)) ++corrupted;
        r->deallocate(b.p, b.bytes, 16);
      }
    }
  }
  CHECK(corrupted.load() == 0);
  CHECK(upstream.live_blocks() == 0);
  CHECK(upstream.mismatched_deallocations() == 0);
}
