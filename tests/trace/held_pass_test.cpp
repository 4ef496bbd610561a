// held_pass: the peak held of a strategy without an upstream (new_delete, malloc), measured
// through glibc's statistics in an untimed replay. What the replayer itself left free in
// glibc's heap (reading a trace leaves such gaps, below memory still in use, where malloc_trim
// cannot reach them) is not the strategy's.
#include <catch2/catch.hpp>
#include <cstdint>
#include <cstdlib>
#include <vector>

#include "held_pass.hpp"
#include "pmrkit/trace/recorded_trace.hpp"
#include "pmrkit/trace/replay.hpp"
#include "sanitizers.hpp"

namespace {

using pmrkit::trace::operation;
using pmrkit::trace::operation_kind;

// One thread: a block of `live` bytes kept to the end, and `pairs` allocations of 16 bytes,
// each freed at once.
pmrkit::trace::recorded_trace one_block_and_pairs(std::uint64_t live, int pairs) {
  pmrkit::trace::recorded_trace trace;
  trace.threads = 1;
  trace.format = "pmrkit trace v1";
  std::uint64_t time = 0;
  std::uint64_t object = 0;
  trace.operations.push_back({time++, live, object++, 0, operation_kind::allocate, 4});
  for (int i = 0; i < pairs; ++i, ++object) {
    trace.operations.push_back({time++, 16, object, 0, operation_kind::allocate, 4});
    trace.operations.push_back({time++, 16, object, 0, operation_kind::deallocate, 4});
  }
  trace.objects = object;
  trace.peak_live_bytes = live + 16;
  trace.live_bytes_at_end = live;
  trace.live_objects_at_end = 1;
  return trace;
}

}  // namespace

TEST_CASE("held_pass does not charge a glibc row for what the replayer left free",
          "[replay][held]") {
  if (pmrkit::test::under_address_sanitizer || pmrkit::test::under_thread_sanitizer) return;
  const pmrkit::trace::replay_plan plan(one_block_and_pairs(64 * 1024, 1000));
  // 8 MiB freed below 8 KiB blocks still in use: free memory glibc keeps and cannot trim.
  std::vector<void*> kept;
  std::vector<void*> freed;
  for (int i = 0; i < 512; ++i) {
    freed.push_back(std::malloc(16 * 1024));
    kept.push_back(std::malloc(8 * 1024));
  }
  for (void* p : freed) std::free(p);

  for (const char* spec : {"new_delete", "malloc"}) {
    const pmrkit::trace_tools::held_figure held = pmrkit::trace_tools::held_pass(plan, spec);
    INFO(spec);
    CHECK(held.method == "mallinfo2");
    REQUIRE(held.peak_held_bytes);
    // The 64 KiB block and glibc's headers, not the 8 MiB of free gaps.
    CHECK(*held.peak_held_bytes >= 64 * 1024);
    CHECK(*held.peak_held_bytes < 256 * 1024);
  }
  for (void* p : kept) std::free(p);
}
