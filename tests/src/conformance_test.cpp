// The conformance suite: every strategy in strategies() must pass every check here.
#include <algorithm>
#include <catch2/catch.hpp>
#include <cstdint>
#include <map>
#include <memory>
#include <memory_resource>
#include <new>
#include <random>
#include <string>
#include <vector>

#include "conformance.hpp"
#include "pmrkit/registry.hpp"
#include "test_resources.hpp"

// A request no memory can hold must be refused with std::bad_alloc, which is what malloc's
// null becomes; AddressSanitizer, whose malloc this binary gets in the sanitizer pass, aborts
// on such a request unless told to return null as glibc does. (Its runtime reads this function
// at start-up; without AddressSanitizer nothing calls it.)
extern "C" const char* __asan_default_options() { return "allocator_may_return_null=1"; }

using pmrkit::test::all_strategy_names;
using pmrkit::test::check_pattern;
using pmrkit::test::fill_pattern;
using pmrkit::test::is_aligned;
using pmrkit::test::tracking_upstream;

namespace {

struct live_block {
  void* p;
  std::size_t bytes;
  std::size_t alignment;
  std::uint64_t seed;
};

class block_set {
 public:
  explicit block_set(std::pmr::memory_resource& r) : r_(r) {}
  ~block_set() { free_all(); }

  void* add(std::size_t bytes, std::size_t alignment) {
    void* p = r_.allocate(bytes, alignment);
    const std::uint64_t seed = next_seed_++;
    fill_pattern(p, bytes, seed);
    blocks_.push_back({p, bytes, alignment, seed});
    return p;
  }
  // Every live block still holds its own pattern: no block overlapped another.
  bool intact() const {
    return std::all_of(blocks_.begin(), blocks_.end(), [](const live_block& b) {
      return check_pattern(b.p, b.bytes, b.seed);
    });
  }
  void free_at(std::size_t i) {
    r_.deallocate(blocks_[i].p, blocks_[i].bytes, blocks_[i].alignment);
    blocks_.erase(blocks_.begin() + static_cast<std::ptrdiff_t>(i));
  }
  void free_all() {
    while (!blocks_.empty()) free_at(blocks_.size() - 1);
  }
  std::vector<live_block>& blocks() { return blocks_; }

 private:
  std::pmr::memory_resource& r_;
  std::vector<live_block> blocks_;
  std::uint64_t next_seed_ = 1;
};

const std::vector<std::size_t> sweep_sizes = {
    0,    1,    7,    8,    15,   16,    17,    24,    31,    32,      48,      63,
    64,   65,   100,  128,  255,  256,   257,   511,   512,   1000,    1024,    2047,
    2048, 4095, 4096, 5000, 8192, 16384, 65535, 65536, 65537, 1 << 20, 3 << 20, (5 << 20) + 3};
const std::vector<std::size_t> sweep_alignments = {1, 2, 4, 8, 16, 32, 64, 128, 256, 1024, 4096};

}  // namespace

TEST_CASE("every strategy: size x alignment sweep, no overlap, exact alignment",
          "[conformance]") {
  const std::string name = GENERATE(from_range(all_strategy_names()));
  CAPTURE(name);
  tracking_upstream upstream;
  {
    auto r = pmrkit::make_resource(name, &upstream);
    block_set blocks(*r);
    for (std::size_t alignment : sweep_alignments) {
      for (std::size_t bytes : sweep_sizes) {
        CAPTURE(bytes, alignment);
        void* p = blocks.add(bytes, alignment);
        REQUIRE(p != nullptr);
        REQUIRE(is_aligned(p, alignment));
      }
    }
    REQUIRE(blocks.intact());
    blocks.free_all();
  }
  CHECK(upstream.live_blocks() == 0);
  CHECK(upstream.mismatched_deallocations() == 0);
}

TEST_CASE("every strategy: LIFO, FIFO and random free orders", "[conformance]") {
  const std::string name = GENERATE(from_range(all_strategy_names()));
  const std::string order = GENERATE(as<std::string>{}, "lifo", "fifo", "random");
  CAPTURE(name, order);
  tracking_upstream upstream;
  {
    auto r = pmrkit::make_resource(name, &upstream);
    block_set blocks(*r);
    std::mt19937 rng(7);
    std::uniform_int_distribution<std::size_t> size(1, 6000);
    for (int round = 0; round < 3; ++round) {
      for (int i = 0; i < 700; ++i) blocks.add(size(rng), std::size_t{8} << (i % 3));
      REQUIRE(blocks.intact());
      // Free half in the chosen order, then check the survivors were not disturbed.
      const std::size_t to_free = blocks.blocks().size() / 2;
      for (std::size_t k = 0; k < to_free; ++k) {
        std::size_t i = 0;
        if (order == "lifo") i = blocks.blocks().size() - 1;
        if (order == "random")
          i = std::uniform_int_distribution<std::size_t>(0, blocks.blocks().size() - 1)(rng);
        blocks.free_at(i);
      }
      REQUIRE(blocks.intact());
    }
    blocks.free_all();
  }
  CHECK(upstream.live_blocks() == 0);
  CHECK(upstream.mismatched_deallocations() == 0);
}

TEST_CASE("every strategy: upstream use and reuse are as strategy_info says", "[conformance]") {
  const std::string name = GENERATE(from_range(all_strategy_names()));
  CAPTURE(name);
  const pmrkit::strategy_info info = pmrkit::describe_strategy(name);
  CAPTURE(info.uses_upstream, info.reuses_memory);
  tracking_upstream upstream;
  auto r = pmrkit::make_resource(name, &upstream);
  // Warm up every size a few times (a cache's limits, and size_class's slots for them, which
  // come from upstream, grow over the first rounds); then the same work many times over, all
  // of it freed each time.
  const auto churn = [&] {
    for (std::size_t bytes : {16u, 64u, 200u, 1000u, 4000u}) {
      std::vector<void*> held;
      for (int i = 0; i < 50; ++i) held.push_back(r->allocate(bytes, 8));
      for (void* p : held) r->deallocate(p, bytes, 8);
    }
  };
  for (int i = 0; i < 4; ++i) churn();
  const std::size_t after_warmup = upstream.allocations();
  for (int i = 0; i < 200; ++i) churn();
  if (!info.uses_upstream) {
    CHECK(upstream.allocations() == 0);  // it must not touch upstream at all
  } else if (info.reuses_memory) {
    CHECK(after_warmup > 0);
    CHECK(upstream.allocations() == after_warmup);  // the freed blocks served the rest
  } else {
    CHECK(after_warmup > 0);
    CHECK(upstream.allocations() > after_warmup);  // it claims not to reuse: it must not
  }
}

TEST_CASE("every strategy: pmr containers work on it", "[conformance]") {
  const std::string name = GENERATE(from_range(all_strategy_names()));
  CAPTURE(name);
  tracking_upstream upstream;
  {
    auto r = pmrkit::make_resource(name, &upstream);
    std::pmr::vector<std::uint64_t> numbers(r.get());
    std::pmr::map<int, std::pmr::string> words(r.get());
    std::pmr::string text(r.get());
    for (int i = 0; i < 5000; ++i) {
      numbers.push_back(static_cast<std::uint64_t>(i) * 3);
      words.emplace(i, std::pmr::string("value number " + std::to_string(i) +
                                            " long enough to leave the small-string buffer"));
      text += static_cast<char>('a' + i % 26);
    }
    for (int i = 0; i < 5000; i += 2) words.erase(i);
    REQUIRE(numbers.size() == 5000);
    CHECK(numbers[4999] == 4999u * 3);
    REQUIRE(words.size() == 2500);
    CHECK(words.at(4999).substr(0, 17) == "value number 4999");
    CHECK(text.size() == 5000);
    CHECK(text[27] == 'b');
    CHECK(words.get_allocator().resource() == r.get());
  }
  CHECK(upstream.live_blocks() == 0);
}

TEST_CASE("every strategy: destruction returns every upstream byte, even with blocks live",
          "[conformance]") {
  const std::string name = GENERATE(from_range(all_strategy_names()));
  CAPTURE(name);
  const bool uses_upstream = pmrkit::describe_strategy(name).uses_upstream;
  tracking_upstream upstream;
  {
    auto r = pmrkit::make_resource(name, &upstream);
    std::vector<void*> kept;
    for (std::size_t bytes : sweep_sizes) kept.push_back(r->allocate(bytes, 16));
    if (uses_upstream) {
      CHECK(upstream.live_blocks() > 0);  // destroyed with these still live
    } else {
      // Its memory comes from elsewhere (and would leak there if kept): upstream was never
      // asked, which is all this test can hold it to.
      CHECK(upstream.allocations() == 0);
      for (std::size_t i = 0; i < kept.size(); ++i) r->deallocate(kept[i], sweep_sizes[i], 16);
    }
  }
  CHECK(upstream.live_blocks() == 0);
  CHECK(upstream.live_bytes() == 0);
  CHECK(upstream.mismatched_deallocations() == 0);
}

TEST_CASE("every strategy: an upstream that throws std::bad_alloc", "[conformance]") {
  const std::string name = GENERATE(from_range(all_strategy_names()));
  CAPTURE(name);
  const bool uses_upstream = pmrkit::describe_strategy(name).uses_upstream;
  // Fail at the 1st, 2nd, 3rd ... upstream allocation until the workload completes.
  bool completed = false;
  std::size_t failures_seen = 0;
  // 256: `checked` takes each of the workload's 214 blocks from upstream separately.
  for (std::size_t allowed = 0; !completed && allowed < 256; ++allowed) {
    CAPTURE(allowed);
    tracking_upstream tracking;
    pmrkit::test::failing_resource failing(&tracking, allowed);
    std::unique_ptr<std::pmr::memory_resource> r;
    try {
      r = pmrkit::make_resource(name, &failing);  // some constructors allocate already
    } catch (const std::bad_alloc&) {
      ++failures_seen;
    }
    if (r) {
      block_set blocks(*r);
      try {
        const std::pair<std::size_t, int> work[] = {{8, 40},   {100, 40}, {3000, 40},
                                                    {70000, 8}, {8, 40},  {200000, 4},
                                                    {64, 40},  {5000000, 2}};
        for (const auto& [bytes, count] : work)
          for (int i = 0; i < count; ++i) blocks.add(bytes, 16);
        completed = true;
      } catch (const std::bad_alloc&) {
        ++failures_seen;  // anything but std::bad_alloc escapes and fails the test
      }
      REQUIRE(blocks.intact());
      blocks.free_all();
      // Still usable once upstream recovers.
      failing.allow_all();
      void* p = r->allocate(128, 16);
      fill_pattern(p, 128, 99);
      CHECK(check_pattern(p, 128, 99));
      r->deallocate(p, 128, 16);
      r.reset();
    }
    CHECK(tracking.live_blocks() == 0);
    CHECK(tracking.mismatched_deallocations() == 0);
  }
  CHECK(completed);
  if (uses_upstream) {
    CHECK(failures_seen > 0);
  } else {
    CHECK(failures_seen == 0);  // an upstream it never calls cannot fail it
  }
}

// No object can be larger than PTRDIFF_MAX bytes, and libstdc++'s aligned operator new (which
// new_delete_resource(), the usual upstream, calls) rounds a size within `alignment` of
// SIZE_MAX up past zero and returns a tiny block: a resource that passes such a request on, or
// adds its own header to it, must refuse it first.
TEST_CASE("every strategy: a request larger than any object throws std::bad_alloc",
          "[conformance]") {
  const std::string name = GENERATE(from_range(all_strategy_names()));
  CAPTURE(name);
  auto r = pmrkit::make_resource(name);  // over the default resource: new_delete_resource()
  constexpr std::size_t largest = SIZE_MAX;
  const std::size_t just_too_large = std::size_t{PTRDIFF_MAX} + 1;
  for (const std::size_t alignment : {1, 8, 16, 64, 4096}) {
    for (const std::size_t bytes : {largest, largest - 1, largest - 7, largest - 40,
                                    largest - 43, largest - 4095, largest - 5000,
                                    just_too_large}) {
      CAPTURE(alignment, bytes);
      CHECK_THROWS_AS(r->allocate(bytes, alignment), std::bad_alloc);
    }
  }
  // An alignment above PTRDIFF_MAX is a power of two too; adding it must not wrap either.
  // Read through a volatile: clang refuses a constant alignment above 2^32 in allocate()'s
  // assume_aligned.
  volatile std::size_t hidden_alignment = std::size_t{1} << 63;
  const std::size_t huge_alignment = hidden_alignment;
  // (Not a small size with it: that one reaches the allocator, where AddressSanitizer's
  // aligned allocation fails a CHECK of its own instead of returning null.)
  for (const std::size_t bytes : {just_too_large, just_too_large + 100, largest}) {
    CAPTURE(bytes);
    CHECK_THROWS_AS(r->allocate(bytes, huge_alignment), std::bad_alloc);
  }
  // And the resource still works.
  void* p = r->allocate(100, 16);
  fill_pattern(p, 100, 5);
  CHECK(check_pattern(p, 100, 5));
  r->deallocate(p, 100, 16);
}

TEST_CASE("every strategy: is_equal is identity", "[conformance]") {
  const std::string name = GENERATE(from_range(all_strategy_names()));
  CAPTURE(name);
  auto a = pmrkit::make_resource(name);
  auto b = pmrkit::make_resource(name);
  CHECK(a->is_equal(*a));
  CHECK_FALSE(a->is_equal(*b));
  CHECK_FALSE(a->is_equal(*std::pmr::new_delete_resource()));
}

// The one-place rule (docs/architecture.md): tests/strategies/test_exact_fit.cpp and one line
// in tests/strategies/list.txt put a strategy into the registry, with its capabilities and
// options, and so into every test above.
TEST_CASE("a strategy added the documented way is registered, described and made",
          "[conformance]") {
  const auto names = all_strategy_names();
  REQUIRE(std::count(names.begin(), names.end(), "test_exact_fit") == 1);
  CHECK(names.back() == "test_exact_fit");  // tests/strategies' list follows src/strategies'
  const pmrkit::strategy_info info = pmrkit::describe_strategy("test_exact_fit");
  CHECK_FALSE(info.thread_safe);
  CHECK(info.uses_upstream);
  CHECK(info.reuses_memory);
  REQUIRE(info.options.size() == 1);
  CHECK(info.options[0].name == "max_cached");
  CHECK(info.options[0].default_value == "1K");
  CHECK(info.options[0].max == (std::size_t{1} << 20));
  // Its factory reads the option through the table: range and all.
  tracking_upstream upstream;
  {
    auto none_cached = pmrkit::make_resource("test_exact_fit:max_cached=0", &upstream);
    none_cached->deallocate(none_cached->allocate(64, 8), 64, 8);
    CHECK(upstream.live_blocks() == 0);  // nothing kept
  }
  CHECK_THROWS_WITH(pmrkit::make_resource("test_exact_fit:max_cached=2M"),
                    Catch::Matchers::Contains("max_cached=2M") &&
                        Catch::Matchers::Contains("from 0 to 1M"));
}
