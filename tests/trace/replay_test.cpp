// The replay engine on a multi-threaded trace with cross-thread frees: each operation on its
// recorded thread, each free after its allocation, the live bytes as recorded.
#include <catch2/catch.hpp>
#include <map>
#include <mutex>
#include <optional>
#include <set>
#include <stdexcept>
#include <thread>
#include <utility>
#include <vector>

#include "pmrkit/trace/replay.hpp"
#include "pmrkit/trace/trace_file.hpp"
#include "trace_test_support.hpp"

using namespace pmrkit::trace;

namespace {

// Notes, for every block, the thread that allocated it and the one that freed it, and each
// thread's sequence of calls.
class thread_log_resource final : public std::pmr::memory_resource {
 public:
  struct call {
    bool allocate;
    std::size_t size;
    std::size_t alignment;
  };
  std::map<std::thread::id, std::vector<call>> calls;
  std::size_t cross_thread_frees = 0;
  std::size_t frees_of_unknown_blocks = 0;
  std::uint64_t live_bytes = 0;

 private:
  void* do_allocate(std::size_t bytes, std::size_t alignment) override {
    void* p = std::pmr::new_delete_resource()->allocate(bytes, alignment);
    const std::lock_guard lock(mutex_);
    owners_[p] = std::this_thread::get_id();
    calls[std::this_thread::get_id()].push_back({true, bytes, alignment});
    live_bytes += bytes;
    return p;
  }
  void do_deallocate(void* p, std::size_t bytes, std::size_t alignment) override {
    {
      const std::lock_guard lock(mutex_);
      const auto it = owners_.find(p);
      if (it == owners_.end()) {
        ++frees_of_unknown_blocks;
      } else {
        cross_thread_frees += it->second != std::this_thread::get_id();
        owners_.erase(it);
      }
      calls[std::this_thread::get_id()].push_back({false, bytes, alignment});
      live_bytes -= bytes;
    }
    std::pmr::new_delete_resource()->deallocate(p, bytes, alignment);
  }
  bool do_is_equal(const std::pmr::memory_resource& other) const noexcept override {
    return this == &other;
  }

  std::mutex mutex_;
  std::map<void*, std::thread::id> owners_;
};

// Three threads: 0 makes blocks that 1 and 2 free; 1 makes blocks 2 frees; a few stay live.
recorded_trace three_thread_trace() {
  recorded_trace t;
  t.format = "test";
  t.threads = 3;
  std::uint64_t time = 0;
  std::uint64_t live = 0;
  const auto add = [&](std::uint32_t thread, operation_kind kind, std::uint64_t object,
                       std::uint64_t size) {
    t.operations.push_back({time++, size, object, thread, kind, 4});
    live = kind == operation_kind::allocate ? live + size : live - size;
    t.peak_live_bytes = std::max(t.peak_live_bytes, live);
  };
  for (std::uint64_t i = 0; i < 300; ++i) {
    const std::uint64_t base = i * 4;
    add(0, operation_kind::allocate, base, 16 + i);
    add(1, operation_kind::allocate, base + 1, 1000 + i);
    add(0, operation_kind::allocate, base + 2, 64);
    add(1, operation_kind::deallocate, base, 16 + i);        // made on 0
    add(2, operation_kind::deallocate, base + 1, 1000 + i);  // made on 1
    add(2, operation_kind::allocate, base + 3, 8);
    if (i % 10 != 0) add(2, operation_kind::deallocate, base + 2, 64);  // made on 0; some stay
    add(2, operation_kind::deallocate, base + 3, 8);                     // its own
  }
  t.objects = 1200;
  t.live_bytes_at_end = live;
  return t;
}

}  // namespace

TEST_CASE("replay runs each operation on its thread, frees after allocations, cross-thread too",
          "[replay][concurrent]") {
  const recorded_trace trace = three_thread_trace();
  const replay_plan plan(trace);
  CHECK(plan.threads().size() == 3);
  CHECK(plan.cross_thread_frees() == 300 + 300 + 270);

  thread_log_resource log;
  std::uint64_t live_when_threads_ended = 0;
  const replay_result result = replay(plan, log);
  CHECK(result.operations == trace.operations.size());
  CHECK(result.threads == 3);
  CHECK(log.frees_of_unknown_blocks == 0);
  // + the 30 left live, freed by the caller
  CHECK(log.cross_thread_frees == plan.cross_thread_frees() + 30);
  CHECK(log.live_bytes == 0);  // the replay returned what the program left live

  // The calls of each replay thread are exactly one trace thread's, in its order; the calling
  // thread only frees what was left live (the trace's live bytes at its end).
  const auto& main_calls = log.calls[std::this_thread::get_id()];
  for (const auto& c : main_calls) {
    CHECK_FALSE(c.allocate);
    live_when_threads_ended += c.size;
  }
  CHECK(live_when_threads_ended == trace.live_bytes_at_end);
  std::set<std::uint32_t> matched;
  for (const auto& [id, calls] : log.calls) {
    if (id == std::this_thread::get_id()) continue;
    bool found = false;
    for (std::uint32_t t = 0; t < 3 && !found; ++t) {
      const auto& steps = plan.threads()[t];
      if (steps.size() != calls.size()) continue;
      bool same = true;
      for (std::size_t i = 0; i < steps.size() && same; ++i)
        same = steps[i].allocate == calls[i].allocate && steps[i].size == calls[i].size &&
               calls[i].alignment == 16;
      if (same) found = matched.insert(t).second;
    }
    CHECK(found);
  }
  CHECK(matched.size() == 3);
}

TEST_CASE("replay of the kept real trace on strategies and on the limit resource",
          "[replay][concurrent]") {
  const recorded_trace trace = read_trace_file(PMRKIT_TRACE_TEST_DATA "/python_threads.trace");
  const replay_plan plan(trace);
  limit_resource limit;
  CHECK(replay(plan, limit).operations == trace.operations.size());
  const replay_result r = replay_strategy(plan, "size_class");
  REQUIRE(r.peak_held_bytes.has_value());
  CHECK(*r.peak_held_bytes >= trace.peak_live_bytes);  // it cannot hold less than was live
  CHECK_FALSE(replay_strategy(plan, "new_delete").peak_held_bytes.has_value());
  CHECK_THROWS_WITH(replay_strategy(plan, "size_class_unsync"), Catch::Contains("not thread-safe"));
}

TEST_CASE("a resource that fails mid-replay: an error naming the operation, every block back",
          "[replay][concurrent]") {
  class failing_after final : public std::pmr::memory_resource {
   public:
    explicit failing_after(int n) : left_(n) {}
    std::atomic<int> live{0};

   private:
    void* do_allocate(std::size_t bytes, std::size_t alignment) override {
      if (left_.fetch_sub(1) <= 0) throw std::bad_alloc();
      ++live;
      return std::pmr::new_delete_resource()->allocate(bytes, alignment);
    }
    void do_deallocate(void* p, std::size_t bytes, std::size_t alignment) override {
      --live;
      std::pmr::new_delete_resource()->deallocate(p, bytes, alignment);
    }
    bool do_is_equal(const std::pmr::memory_resource& o) const noexcept override {
      return this == &o;
    }
    std::atomic<int> left_;
  };
  const replay_plan plan(three_thread_trace());
  failing_after resource(100);
  CHECK_THROWS_WITH(replay(plan, resource),
                    Catch::Contains("replay: operation") && Catch::Contains("of thread"));
  CHECK(resource.live == 0);
}

namespace {

// Threads that run one after another: thread t allocates and frees `per_thread` blocks, then
// the next one starts. With `overlap`, thread t + 1's first allocation comes before thread t's
// last free.
recorded_trace threads_in_turn(std::uint32_t count, std::uint64_t per_thread, bool overlap) {
  recorded_trace t;
  t.format = "test";
  t.threads = count;
  std::uint64_t object = 0;
  const auto emit = [&](operation op) {
    op.time_ns = t.operations.size();
    t.operations.push_back(op);
  };
  std::optional<operation> last_free_of_previous;
  for (std::uint32_t thread = 0; thread < count; ++thread) {
    std::vector<operation> ops;
    for (std::uint64_t i = 0; i < per_thread; ++i, ++object) {
      ops.push_back({0, 32, object, thread, operation_kind::allocate, 4});
      ops.push_back({0, 32, object, thread, operation_kind::deallocate, 4});
    }
    emit(ops.front());
    if (last_free_of_previous) emit(*std::exchange(last_free_of_previous, std::nullopt));
    for (std::size_t k = 1; k + 1 < ops.size(); ++k) emit(ops[k]);
    if (overlap && thread + 1 < count)
      last_free_of_previous = ops.back();
    else
      emit(ops.back());
  }
  t.objects = object;
  t.peak_live_bytes = overlap ? 64 : 32;
  return t;
}

}  // namespace

TEST_CASE("threads that never overlap share a replay thread; one lane replays on the caller",
          "[replay][concurrent]") {
  // A thread per connection: thousands of trace threads, one alive at a time.
  const recorded_trace in_turn = threads_in_turn(5000, 3, false);
  const replay_plan plan(in_turn);
  REQUIRE(plan.lanes().size() == 1);
  CHECK(plan.lanes().front().size() == 5000);
  thread_log_resource log;
  const replay_result r = replay(plan, log);
  CHECK(r.threads == 5000);
  CHECK(r.replay_threads == 1);
  // On the calling thread: a resource that belongs to the thread that made it is used there.
  REQUIRE(log.calls.size() == 1);
  CHECK(log.calls.begin()->first == std::this_thread::get_id());
  CHECK(log.calls.begin()->second.size() == in_turn.operations.size());
  CHECK(log.live_bytes == 0);
  // Not thread-safe, but one lane: allowed.
  CHECK_NOTHROW(replay_strategy(plan, "size_class_unsync"));

  // Each thread's first operation before the last of the one before it: two lanes, each
  // taking every second thread, in order.
  const replay_plan overlapping(threads_in_turn(6, 3, true));
  REQUIRE(overlapping.lanes().size() == 2);
  CHECK(overlapping.lanes()[0] == std::vector<std::uint32_t>{0, 2, 4});
  CHECK(overlapping.lanes()[1] == std::vector<std::uint32_t>{1, 3, 5});
  thread_log_resource two;
  CHECK(replay(overlapping, two).replay_threads == 2);
  CHECK(two.calls.size() == 2);
  CHECK(two.frees_of_unknown_blocks == 0);
  CHECK(two.live_bytes == 0);
  CHECK_THROWS_WITH(replay_strategy(overlapping, "size_class_unsync"),
                    Catch::Contains("2 threads alive at once"));
}

TEST_CASE("a failed replay stops the other threads soon", "[replay][concurrent]") {
  // Thread 0 fails its one allocation once thread 1 is well under way; thread 1 has a million
  // operations of its own, and must not run them all.
  constexpr std::uint64_t busy_blocks = 500'000;
  recorded_trace t;
  t.format = "test";
  t.threads = 2;
  std::uint64_t time = 0;
  t.operations.push_back({time++, 4096, 0, 1, operation_kind::allocate, 4});
  t.operations.push_back({time++, 7777, 1, 0, operation_kind::allocate, 4});
  t.operations.push_back({time++, 4096, 0, 1, operation_kind::deallocate, 4});
  for (std::uint64_t i = 0; i < busy_blocks; ++i) {
    t.operations.push_back({time++, 32, 2 + i, 1, operation_kind::allocate, 4});
    t.operations.push_back({time++, 32, 2 + i, 1, operation_kind::deallocate, 4});
  }
  t.objects = 2 + busy_blocks;
  t.peak_live_bytes = 4096 + 7777;
  class failing_when_busy final : public std::pmr::memory_resource {
   public:
    std::atomic<std::uint64_t> calls{0};
    std::atomic<std::uint64_t> calls_after_failure{0};

   private:
    void* do_allocate(std::size_t bytes, std::size_t alignment) override {
      if (bytes == 7777) {
        while (calls.load() < 1000) std::this_thread::yield();
        failed_.store(true);
        throw std::bad_alloc();
      }
      count();
      return std::pmr::new_delete_resource()->allocate(bytes, alignment);
    }
    void do_deallocate(void* p, std::size_t bytes, std::size_t alignment) override {
      count();
      std::pmr::new_delete_resource()->deallocate(p, bytes, alignment);
    }
    bool do_is_equal(const std::pmr::memory_resource& o) const noexcept override {
      return this == &o;
    }
    void count() {
      ++calls;
      if (failed_.load()) ++calls_after_failure;
    }
    std::atomic<bool> failed_{false};
  };
  const replay_plan plan(t);
  REQUIRE(plan.lanes().size() == 2);
  failing_when_busy resource;
  CHECK_THROWS_WITH(replay(plan, resource), Catch::Contains("of thread 0"));
  // 64 operations between looks, and the time the failing thread takes to say so: far below
  // the million it would otherwise run.
  CHECK(resource.calls_after_failure < busy_blocks / 10);
  CHECK(resource.calls < busy_blocks);
}
