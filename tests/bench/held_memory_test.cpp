// bench/held_memory: how each row's held memory is measured, and that each probe sees memory
// its allocator takes (the numbers behind peak_held_bytes).
#include "held_memory.hpp"

#include <catch2/catch.hpp>
#include <cstdlib>
#include <cstring>

#include "mimalloc_loader.hpp"
#include "sanitizers.hpp"

using pmrkit::bench::held_method;
using pmrkit::bench::held_method_for;
using pmrkit::bench::process_held_probe;

namespace {
constexpr std::size_t big = 48u << 20;  // above any noise of the test harness
}

TEST_CASE("held memory: each kind of row is measured its own way", "[bench][held]") {
  CHECK(held_method_for("size_class", false) == held_method::upstream);
  CHECK(held_method_for("size_class:max_pooled=128K", true) == held_method::upstream);
  CHECK(held_method_for("malloc", false) == held_method::mallinfo2);
  CHECK(held_method_for("new_delete", false) == held_method::mallinfo2);
  CHECK(held_method_for("malloc", true) == held_method::rss);  // under LD_PRELOAD
  CHECK(held_method_for("mimalloc", false) == held_method::mimalloc_stats);
  CHECK(held_method_for("mimalloc_heap", true) == held_method::mimalloc_stats);
  CHECK(held_method_for("mimalloc_plain", false) == held_method::mimalloc_stats);
  CHECK(held_method_for("bare_list", false) == held_method::upstream);
  CHECK(held_method_for("limit", false) == held_method::static_buffers);
  CHECK(pmrkit::bench::held_method_name(held_method::mimalloc_stats) == "mimalloc_stats");
  CHECK_THROWS_AS(held_method_for("no_such_strategy", false), std::invalid_argument);
}

TEST_CASE("held memory: glibc's statistics see a block malloc holds, and the peak stays",
          "[bench][held]") {
  if (pmrkit::test::under_address_sanitizer || pmrkit::test::under_thread_sanitizer)
    return;  // the sanitizer's allocator replaces glibc's, whose statistics are then empty
  process_held_probe probe(held_method::mallinfo2);
  probe.start();
  void* p = std::malloc(big);
  REQUIRE(p);
  CHECK(probe.now() >= big);
  probe.sample();
  std::free(p);
  CHECK(probe.now() < big);  // a block this large is mmapped and returned at once
  CHECK(probe.peak() >= big);
}

TEST_CASE("held memory: mimalloc's committed bytes see what mimalloc took", "[bench][held]") {
  const auto& mi = pmrkit::detail::mimalloc();
  process_held_probe probe(held_method::mimalloc_stats);
  probe.start();
  void* p = mi.malloc(big);
  REQUIRE(p);
  std::memset(p, 1, big);
  CHECK(probe.now() >= big);
  mi.free(p);
  CHECK(probe.peak() >= big);  // tracked by mimalloc between samples
  probe.start();               // a new row starts the peak again, from what is held now
  CHECK(probe.peak() <= probe.now() + (1u << 20));
}

TEST_CASE("held memory: the RSS high-water mark sees pages touched since start",
          "[bench][held]") {
  process_held_probe probe(held_method::rss);
  probe.start();
  auto* p = static_cast<char*>(std::malloc(big));
  REQUIRE(p);
  std::memset(p, 1, big);
  // Read back through volatile, or the compiler may drop the malloc, memset and free together.
  CHECK(static_cast<volatile char*>(p)[big - 1] == 1);
  std::free(p);
  CHECK(probe.peak() >= big * 9 / 10);  // RSS is counted in pages, and the baseline moves
}
