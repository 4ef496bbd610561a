// The replay engine on a multi-threaded trace with cross-thread frees: each operation on its
// recorded thread, each free after its allocation, the live bytes as recorded.
#include <catch2/catch.hpp>
#include <map>
#include <mutex>
#include <set>
#include <stdexcept>
#include <thread>
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
