#include <catch2/catch.hpp>
#include <memory_resource>
#include <stdexcept>
#include <thread>
#include <vector>

#include "pmrkit/counting_resource.hpp"
#include "pmrkit/recording_resource.hpp"
#include "pmrkit/trace/replay.hpp"
#include "pmrkit/trace/trace_file.hpp"
#include "trace_test_support.hpp"

using pmrkit::trace::operation_kind;
using trace_test::memory_sink;

TEST_CASE("recording_resource records exactly the calls made, in order", "[trace]") {
  memory_sink sink;
  pmrkit::counting_resource upstream;
  {
    pmrkit::recording_resource recorder(&upstream, sink);
    void* a = recorder.allocate(100, 8);
    void* b = recorder.allocate(200, 64);
    recorder.deallocate(a, 100, 8);
    void* c = recorder.allocate(100, 8);  // may reuse a's address: a new object all the same
    recorder.deallocate(b, 200, 64);
    recorder.deallocate(c, 100, 8);
    void* kept = recorder.allocate(7, 1);  // freed after the recording: live at its end
    recorder.finish();
    CHECK(recorder.events_written() == 7);
    recorder.deallocate(kept, 7, 1);  // forwarded, not recorded
    CHECK(recorder.events_written() == 7);
  }
  CHECK(upstream.stats().allocations == 4);  // every call was forwarded

  const auto trace = pmrkit::trace::parse_pmrkit_stream(sink.stream);
  REQUIRE(trace.operations.size() == 7);
  CHECK(trace.threads == 1);
  CHECK(trace.objects == 4);
  CHECK(trace.unpaired_frees == 0);
  CHECK(trace.implicit_frees == 0);
  struct expected {
    operation_kind kind;
    std::uint64_t size;
    std::size_t alignment;
    std::uint64_t object;
  };
  const expected want[] = {
      {operation_kind::allocate, 100, 8, 0},    {operation_kind::allocate, 200, 64, 1},
      {operation_kind::deallocate, 100, 8, 0},  {operation_kind::allocate, 100, 8, 2},
      {operation_kind::deallocate, 200, 64, 1}, {operation_kind::deallocate, 100, 8, 2},
      {operation_kind::allocate, 7, 1, 3}};
  for (std::size_t i = 0; i < 7; ++i) {
    INFO("operation " << i);
    CHECK(trace.operations[i].kind == want[i].kind);
    CHECK(trace.operations[i].size == want[i].size);
    CHECK(trace.operations[i].alignment() == want[i].alignment);
    CHECK(trace.operations[i].object == want[i].object);
    if (i > 0) CHECK(trace.operations[i].time_ns >= trace.operations[i - 1].time_ns);
  }
  CHECK(trace.peak_live_bytes == 300);
  CHECK(trace.live_bytes_at_end == 7);
  CHECK(trace.live_objects_at_end == 1);
}

TEST_CASE("recording_resource records each thread's calls, with frees on other threads",
          "[trace][concurrent]") {
  constexpr int threads = 4;
  constexpr int per_thread = 500;  // with 256-byte buffers: many chunks per thread
  memory_sink sink;
  pmrkit::recording_resource recorder(std::pmr::new_delete_resource(), sink, {.buffer_bytes = 256});
  std::vector<std::vector<void*>> blocks(threads, std::vector<void*>(per_thread));
  const auto size_of = [](int thread, int i) {
    return static_cast<std::size_t>(1000 * (thread + 1) + i % 7);
  };
  {
    std::vector<std::thread> makers;
    for (int t = 0; t < threads; ++t)
      makers.emplace_back([&, t] {
        for (int i = 0; i < per_thread; ++i) blocks[t][i] = recorder.allocate(size_of(t, i), 16);
      });
    for (auto& m : makers) m.join();
  }
  {
    std::vector<std::thread> freers;  // thread t frees what thread t+1 made
    for (int t = 0; t < threads; ++t)
      freers.emplace_back([&, t] {
        const int owner = (t + 1) % threads;
        for (int i = 0; i < per_thread; ++i)
          recorder.deallocate(blocks[owner][i], size_of(owner, i), 16);
      });
    for (auto& f : freers) f.join();
  }
  // Exited threads' buffers went to the sink when they exited, before finish().
  CHECK(recorder.events_written() == 2u * threads * per_thread);
  recorder.finish();

  const auto trace = pmrkit::trace::parse_pmrkit_stream(sink.stream);
  CHECK(trace.threads == 2 * threads);  // the second set of threads are new threads
  CHECK(trace.operations.size() == 2u * threads * per_thread);
  CHECK(trace.unpaired_frees == 0);
  CHECK(trace.implicit_frees == 0);
  CHECK(trace.live_bytes_at_end == 0);
  std::vector<std::uint32_t> allocated_on(trace.objects, UINT32_MAX);
  std::size_t cross_thread = 0;
  for (const auto& op : trace.operations) {
    if (op.kind == operation_kind::allocate) {
      allocated_on[op.object] = op.thread;
    } else {
      REQUIRE(allocated_on[op.object] != UINT32_MAX);  // every free after its allocation
      cross_thread += allocated_on[op.object] != op.thread;
    }
  }
  CHECK(cross_thread == static_cast<std::size_t>(threads * per_thread));
  for (int t = 0; t < threads; ++t)
    for (int i = 0; i < 7; ++i)
      CHECK(trace_test::count_ops(trace, operation_kind::allocate, size_of(t, i)) ==
            static_cast<std::size_t>(per_thread / 7 + (i < per_thread % 7 ? 1 : 0)));
}

namespace {
class failing_sink final : public pmrkit::trace_sink {
 public:
  explicit failing_sink(int writes_allowed) : left_(writes_allowed) {}
  void write(std::span<const std::byte>) override {
    if (left_-- <= 0) throw std::runtime_error("disk full");
  }

 private:
  int left_;
};
}  // namespace

namespace {
pmrkit::recording_resource* thread_exit_recorder = nullptr;
void* kept_by_exited_thread = nullptr;
}  // namespace

TEST_CASE("recording_resource records a thread_local container freed as its thread ends",
          "[trace]") {
  // Destroyed after the thread's exit hook gave its buffer back: its free went unrecorded, and
  // the replay showed a leak that the program does not have.
  memory_sink sink;
  {
    pmrkit::recording_resource recorder(std::pmr::new_delete_resource(), sink);
    thread_exit_recorder = &recorder;
    std::thread([] {
      // Made before the thread's first call arms the recorder's exit hook, so destroyed after
      // the hook has run (thread_locals go in the reverse order of their construction).
      thread_local std::pmr::vector<int> late(thread_exit_recorder);
      for (int i = 0; i < 1000; ++i) late.push_back(i);
      kept_by_exited_thread = thread_exit_recorder->allocate(8, 8);  // live at the end
    }).join();
    recorder.finish();
    recorder.deallocate(kept_by_exited_thread, 8, 8);  // after the recording: forwarded only
  }
  const auto trace = pmrkit::trace::parse_pmrkit_stream(sink.stream);
  CHECK(trace.unpaired_frees == 0);
  // The vector's last array, freed at thread exit, is not live at the end; the one block the
  // thread never freed is.
  CHECK(trace.live_objects_at_end == 1);
  CHECK(trace.live_bytes_at_end == 8);
}

TEST_CASE("a thread's frees after its exit hook keep its number: threads in turn stay apart",
          "[trace]") {
  // Three threads one after another, each with a thread_local container destroyed after the
  // recorder's exit hook. Recorded under one number shared by such late frees, they made a
  // thread that spanned all three: two lanes and cross-thread frees, so the replay refused the
  // single-threaded strategies for a program that never ran two threads at once.
  memory_sink sink;
  pmrkit::recording_resource recorder(std::pmr::new_delete_resource(), sink);
  thread_exit_recorder = &recorder;
  for (int i = 0; i < 3; ++i)
    std::thread([] {
      thread_local std::pmr::vector<int> late(thread_exit_recorder);
      for (int k = 0; k < 100; ++k) late.push_back(k);
      thread_exit_recorder->deallocate(thread_exit_recorder->allocate(64), 64);
    }).join();
  recorder.finish();
  const auto trace = pmrkit::trace::parse_pmrkit_stream(sink.stream);
  CHECK(trace.threads == 3);
  CHECK(trace.unpaired_frees == 0);
  CHECK(trace.live_objects_at_end == 0);
  const pmrkit::trace::replay_plan plan(trace);
  CHECK(plan.cross_thread_frees() == 0);
  CHECK(plan.lanes().size() == 1);
}

TEST_CASE("a failing sink stops the recording, not the program", "[trace]") {
  failing_sink sink(1);  // the header only
  pmrkit::counting_resource upstream;
  pmrkit::recording_resource recorder(&upstream, sink, {.buffer_bytes = 256});
  for (int i = 0; i < 1000; ++i) recorder.deallocate(recorder.allocate(64, 8), 64, 8);
  CHECK(upstream.stats().allocations == 1000);
  CHECK(upstream.stats().bytes_in_use == 0);
  CHECK_THROWS_WITH(recorder.finish(), "disk full");
}

TEST_CASE("recording_resource refuses a buffer too small for a chunk", "[trace]") {
  memory_sink sink;
  CHECK_THROWS_AS(
      pmrkit::recording_resource(std::pmr::new_delete_resource(), sink, {.buffer_bytes = 16}),
      std::invalid_argument);
}
