// size_class's large blocks (requests above max_pooled, which go straight to upstream): all
// their bookkeeping comes from upstream, so fault injection on upstream reaches it and the
// global heap is never touched. A program of its own because it replaces operator new to
// count global-heap allocations (support/global_heap.hpp).
#include <catch2/catch.hpp>
#include <cstddef>
#include <vector>

#include "global_heap.hpp"
#include "pmrkit/counting_resource.hpp"
#include "pmrkit/size_class_resource.hpp"
#include "pmrkit/testing/failure_sweep.hpp"
#include "sanitizers.hpp"

namespace {

constexpr std::size_t max_pooled = 4096;
constexpr std::size_t large = 3 * max_pooled;
constexpr std::size_t many = 100;  // enough to make any table of blocks grow a few times

pmrkit::size_class_options options() {
  pmrkit::size_class_options o;
  o.max_pooled = max_pooled;
  return o;
}

template <class Resource>
std::vector<void*> allocate_large(Resource& r, std::size_t count) {
  std::vector<void*> blocks;
  blocks.reserve(count);
  for (std::size_t i = 0; i < count; ++i) blocks.push_back(r.allocate(large + i, 16));
  return blocks;
}

template <class Resource>
void deallocate_large(Resource& r, const std::vector<void*>& blocks) {
  for (std::size_t i = 0; i < blocks.size(); ++i) r.deallocate(blocks[i], large + i, 16);
}

}  // namespace

TEMPLATE_TEST_CASE("size_class: large blocks make no global-heap allocation", "[size_class][large]",
                   pmrkit::size_class_resource, pmrkit::size_class_unsync_resource) {
  pmrkit::counting_resource upstream(std::pmr::new_delete_resource());
  TestType r(options(), &upstream);
  std::vector<void*> blocks;
  blocks.reserve(many);

  const auto before = pmrkit::test::global_heap::allocations();
  for (std::size_t i = 0; i < many; ++i) blocks.push_back(r.allocate(large + i, 16));
  deallocate_large(r, blocks);
  r.release();
  CHECK(pmrkit::test::global_heap::allocations() == before);
  CHECK(upstream.stats().bytes_in_use == 0);
}

TEMPLATE_TEST_CASE("size_class: every upstream allocation of the large path can fail cleanly",
                   "[size_class][large]", pmrkit::size_class_resource,
                   pmrkit::size_class_unsync_resource) {
  const auto result = pmrkit::testing::failure_sweep(
      [](std::pmr::memory_resource& memory) {
        return std::make_unique<TestType>(options(), &memory);
      },
      [](std::unique_ptr<TestType>& r) { deallocate_large(*r, allocate_large(*r, many)); },
      [](std::unique_ptr<TestType>& r) {
        // Blocks the failed operation had allocated stay live until the resource goes.
        const auto live = r->stats().large_live_blocks;
        const auto blocks = allocate_large(*r, 3);
        CHECK(r->stats().large_live_blocks == live + 3);
        deallocate_large(*r, blocks);
        CHECK(r->stats().large_live_blocks == live);
      });
  CHECK(result.allocations > many);  // the blocks, and the memory that tracks them
  CHECK(result.surfaced == result.steps - 1);
}

// Debug builds assert on such a free instead; the count is what release builds show.
#ifdef NDEBUG
TEMPLATE_TEST_CASE("size_class: a large block the resource does not hold is counted, not freed",
                   "[size_class][large]", pmrkit::size_class_resource,
                   pmrkit::size_class_unsync_resource) {
  pmrkit::counting_resource upstream(std::pmr::new_delete_resource());
  TestType r(options(), &upstream);
  TestType other(options(), &upstream);

  void* foreign = other.allocate(large, 16);
  r.deallocate(foreign, large, 16);  // given out by another resource
  CHECK(r.stats().large_unknown_deallocations == 1);
  CHECK(r.stats().large_deallocations == 0);
  CHECK(other.stats().large_live_blocks == 1);  // still other's, still allocated
  other.deallocate(foreign, large, 16);

  void* mine = r.allocate(large, 16);
  r.deallocate(mine, large, 16);
  const auto held = upstream.stats().bytes_in_use;
  r.deallocate(mine, large, 16);  // freed twice
  CHECK(r.stats().large_unknown_deallocations == 2);
  CHECK(r.stats().large_deallocations == 1);
  CHECK(upstream.stats().bytes_in_use == held);  // upstream did not see the second free

  void* released = r.allocate(large, 16);
  r.release();  // counters restart at zero
  r.deallocate(released, large, 16);
  CHECK(r.stats().large_unknown_deallocations == 1);
  CHECK(r.stats().bytes_from_upstream == 0);
  CHECK(upstream.stats().bytes_in_use == other.stats().bytes_from_upstream);
}

TEMPLATE_TEST_CASE("size_class: a null large block is counted and leaves the table exact",
                   "[size_class][large]", pmrkit::size_class_resource,
                   pmrkit::size_class_unsync_resource) {
  // A caller's bug: memory_resource::deallocate is declared nonnull, so UBSan (in our ASan
  // pass) stops at the call itself; the other builds check what the resource does with it.
  if (pmrkit::test::under_address_sanitizer) {
    WARN("skipped under AddressSanitizer+UBSan: the deliberate null deallocate is UB there");
    return;
  }
  TestType r(options());
  void* kept = r.allocate(large, 16);
  // Read through a volatile so the compiler neither rejects nor assumes it away, as with a
  // null from a real program.
  void* volatile null_block = nullptr;
  r.deallocate(null_block, large, 16);
  CHECK(r.stats().large_unknown_deallocations == 1);
  CHECK(r.stats().large_live_blocks == 1);
  // The table still finds the live block, and grows as blocks come (a count too low would
  // let it fill up and loop).
  std::vector<void*> more;
  for (int i = 0; i < 64; ++i) more.push_back(r.allocate(large, 16));
  for (void* p : more) r.deallocate(p, large, 16);
  r.deallocate(kept, large, 16);
  CHECK(r.stats().large_live_blocks == 0);
  CHECK(r.stats().large_unknown_deallocations == 1);
}
#endif

TEMPLATE_TEST_CASE("size_class: trim() gives back the large blocks' table once none is out",
                   "[size_class][large]", pmrkit::size_class_resource,
                   pmrkit::size_class_unsync_resource) {
  // trim() promises to leave only what live blocks need: the table that tracks large blocks
  // (its storage from upstream) was kept after the last of them went.
  pmrkit::counting_resource upstream(std::pmr::new_delete_resource());
  TestType r(options(), &upstream);
  deallocate_large(r, allocate_large(r, many));
  r.trim();
  CHECK(upstream.stats().bytes_in_use == 0);
  CHECK(r.stats().bytes_from_upstream == 0);
  // And it works again afterwards, the table made anew.
  const std::vector<void*> again = allocate_large(r, 3);
  CHECK(r.stats().large_live_blocks == 3);
  deallocate_large(r, again);
  r.trim();
  CHECK(upstream.stats().bytes_in_use == 0);
}
