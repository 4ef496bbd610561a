// mimalloc_resource and mimalloc_heap_resource (mimalloc loaded privately): alignment,
// including the power-of-two sizes that mimalloc 2.0.9 under-aligns, freed memory reused,
// heaps kept apart, and an impossible request reported as std::bad_alloc. Memory comes from
// mimalloc, not from an upstream resource, so there is no upstream to count.
#include "pmrkit/mimalloc_resource.hpp"

#include <barrier>
#include <catch2/catch.hpp>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <new>
#include <set>
#include <thread>
#include <vector>

#include "child_process.hpp"
#include "test_resources.hpp"

TEMPLATE_TEST_CASE("mimalloc: every block is aligned as asked and blocks do not overlap",
                   "[mimalloc]", pmrkit::mimalloc_resource, pmrkit::mimalloc_heap_resource) {
  TestType r;
  pmrkit::test::check_alignment_and_overlap(r, {1, 24, 128, 256, 512, 1000, 1024, 70000}, 65536);
}

TEMPLATE_TEST_CASE("mimalloc: freed memory is reused", "[mimalloc]", pmrkit::mimalloc_resource,
                   pmrkit::mimalloc_heap_resource) {
  TestType r;
  std::vector<void*> first;
  for (int i = 0; i < 1000; ++i) first.push_back(r.allocate(48, 16));
  const std::set<void*> freed(first.begin(), first.end());
  for (void* p : first) r.deallocate(p, 48, 16);
  std::size_t reused = 0;
  std::vector<void*> second;
  for (int i = 0; i < 1000; ++i) {
    second.push_back(r.allocate(48, 16));
    reused += freed.count(second.back());
  }
  CHECK(reused > 500);
  for (void* p : second) r.deallocate(p, 48, 16);
}

TEST_CASE("mimalloc: two heaps never hand out the same block", "[mimalloc]") {
  pmrkit::mimalloc_heap_resource a, b;
  CHECK_FALSE(a.is_equal(b));
  std::set<void*> from_a;
  for (int i = 0; i < 100; ++i) from_a.insert(a.allocate(64, 8));
  for (int i = 0; i < 100; ++i) CHECK(from_a.count(b.allocate(64, 8)) == 0);
  // No block is freed one by one: destroying a heap frees all of its blocks at once.
}

TEST_CASE("mimalloc: a heap used and destroyed on its thread, its blocks freed on another",
          "[mimalloc]") {
  // Blocks may be freed on any thread; only allocating and destroying belong to the heap's.
  const auto outcome = pmrkit::test::run_in_child([] {
    std::vector<void*> blocks;
    std::barrier step(2);
    pmrkit::mimalloc_heap_resource* shared = nullptr;
    std::thread owner([&] {
      pmrkit::mimalloc_heap_resource heap;
      shared = &heap;
      for (int i = 0; i < 100; ++i) blocks.push_back(heap.allocate(64, 8));
      step.arrive_and_wait();  // the main thread frees them
      step.arrive_and_wait();
      for (int i = 0; i < 100; ++i) heap.deallocate(heap.allocate(64, 8), 64, 8);
    });
    step.arrive_and_wait();
    for (void* p : blocks) shared->deallocate(p, 64, 8);
    step.arrive_and_wait();
    owner.join();
  });
  CHECK_FALSE(outcome.aborted);
  CHECK(outcome.exit_code == 0);
}

namespace {

// In a child process: a heap made on a thread that has since ended, then handed to `destroy`.
template <class Destroy>
pmrkit::test::child_outcome heap_outliving_its_thread(Destroy destroy) {
  return pmrkit::test::run_in_child([&] {
    std::unique_ptr<pmrkit::mimalloc_heap_resource> heap;
    std::thread([&] {
      heap = std::make_unique<pmrkit::mimalloc_heap_resource>();
      (void)heap->allocate(64, 8);
    }).join();
    destroy(heap);
  });
}

void check_aborted_naming_the_rule(const pmrkit::test::child_outcome& outcome) {
  CHECK(outcome.aborted);
  CHECK_THAT(outcome.stderr_text,
             Catch::Matchers::Contains("destroyed on a thread other than the one that created it"));
}

}  // namespace

TEST_CASE("mimalloc: a heap destroyed after its thread ended aborts with the rule it broke",
          "[mimalloc]") {
  // mimalloc deleted the heap when its thread ended; destroying it again corrupted memory.
  check_aborted_naming_the_rule(heap_outliving_its_thread([](auto& heap) { heap.reset(); }));
}

TEST_CASE("mimalloc: a heap destroyed on a later thread that got its thread's id aborts too",
          "[mimalloc]") {
  // glibc gives an ended thread's id to the next thread it starts: the id alone let this pass.
  check_aborted_naming_the_rule(heap_outliving_its_thread(
      [](auto& heap) { std::thread([&] { heap.reset(); }).join(); }));
}

TEMPLATE_TEST_CASE("mimalloc: an impossible request is std::bad_alloc", "[mimalloc]",
                   pmrkit::mimalloc_resource, pmrkit::mimalloc_heap_resource) {
  TestType r;
  CHECK_THROWS_AS(r.allocate(SIZE_MAX / 2, 16), std::bad_alloc);
  // Within 15 of the largest size, rounding up to a multiple of 16 would wrap to a tiny block.
  for (std::size_t below = 0; below < 16; ++below)
    CHECK_THROWS_AS(r.allocate(SIZE_MAX - below, 16), std::bad_alloc);
  pmrkit::test::check_usable(r, 100, 16);
}

TEMPLATE_TEST_CASE("mimalloc: a zero-byte block is aligned as asked", "[mimalloc]",
                   pmrkit::mimalloc_resource, pmrkit::mimalloc_heap_resource) {
  // mi_malloc(0) serves from the 8-byte class, whose blocks are 8 mod 16 every other time.
  TestType r;
  std::vector<void*> blocks;
  for (int i = 0; i < 64; ++i) blocks.push_back(r.allocate(0, 16));
  for (void* p : blocks) CHECK(reinterpret_cast<std::uintptr_t>(p) % 16 == 0);
  for (void* p : blocks) r.deallocate(p, 0, 16);
}
