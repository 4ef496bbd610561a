// pmrkit/trace/replay.hpp — replay a recorded trace on a memory resource and measure it.
//
// A multi-threaded trace replays each operation on the thread that made it; a free made on
// another thread than its allocation waits until that allocation has happened (the trace's order
// guarantees no cycle). Threads whose lifetimes do not overlap (one after another, as a program
// that starts a thread per connection makes them) share one replay thread, which runs them in
// turn, so that a trace of thousands of threads measures the resource, not the scheduler; a trace
// whose threads never overlap (one thread, most often) replays on the calling thread, where a
// resource bound to the thread that made it (mimalloc_heap) belongs. Blocks are never touched,
// only allocated and freed, so what is timed is the resource's work plus the replayer's own (the
// `limit_resource` row measures the latter). Blocks still live at the end are freed after the
// clock stops, on the calling thread.
//
// Thread-safety: a replay_plan is immutable and may be replayed from several calls at once;
// replay() uses the resource from its replay threads at once, so a plan of several lanes needs
// a thread-safe resource (replay_strategy checks this for registry specs).
#pragma once

#include <chrono>
#include <cstdint>
#include <memory_resource>
#include <optional>
#include <string>
#include <vector>

#include "pmrkit/trace/recorded_trace.hpp"

namespace pmrkit::trace {

// The trace cut into one list of operations per thread, ready to replay.
class replay_plan {
 public:
  explicit replay_plan(const recorded_trace& trace);

  struct step {
    std::uint64_t object;
    std::uint64_t size;
    std::uint8_t alignment_log2;
    bool allocate;
  };
  const std::vector<std::vector<step>>& threads() const noexcept { return threads_; }
  // The trace's threads (indexes into threads()) grouped into lanes, each lane's in the order
  // they ran: no two threads of a lane have operations between each other's first and last.
  // One replay thread runs each lane. Threads without operations are in none.
  const std::vector<std::vector<std::uint32_t>>& lanes() const noexcept { return lanes_; }
  std::uint64_t objects() const noexcept { return objects_; }
  std::uint64_t operations() const noexcept { return operations_; }
  // Frees made on another thread than the allocation.
  std::uint64_t cross_thread_frees() const noexcept { return cross_thread_frees_; }
  std::uint64_t peak_live_bytes() const noexcept { return peak_live_bytes_; }
  std::uint64_t live_bytes_at_end() const noexcept { return live_bytes_at_end_; }

 private:
  std::vector<std::vector<step>> threads_;
  std::vector<std::vector<std::uint32_t>> lanes_;
  std::uint64_t objects_ = 0;
  std::uint64_t operations_ = 0;
  std::uint64_t cross_thread_frees_ = 0;
  std::uint64_t peak_live_bytes_ = 0;
  std::uint64_t live_bytes_at_end_ = 0;

  static std::vector<std::vector<std::uint32_t>> lanes_of(const recorded_trace& trace);
};

struct replay_result {
  std::uint64_t operations = 0;
  std::uint32_t threads = 0;         // the trace's
  std::uint32_t replay_threads = 0;  // the lanes they ran on
  std::chrono::nanoseconds elapsed{0};  // wall time from the common start to the last thread
  double ns_per_operation() const noexcept {
    return operations ? static_cast<double>(elapsed.count()) / static_cast<double>(operations) : 0;
  }
  std::uint64_t peak_live_bytes = 0;  // of the trace: what the program asked for at most
  // What the strategy took from its upstream at most; empty when it does not use one.
  std::optional<std::uint64_t> peak_held_bytes;
};

// Replays the plan once on `resource`. Throws std::runtime_error naming the operation and
// thread if the resource throws (the other threads stop within 64 operations, and every block
// is returned), and what std::thread throws if a replay thread cannot start (every block
// returned too).
replay_result replay(const replay_plan& plan, std::pmr::memory_resource& resource);

// Replays on the registry strategy `spec` made over a counting new_delete upstream, so the
// result has peak_held_bytes. Throws std::invalid_argument for a bad spec, or one that is not
// thread-safe when the plan has several lanes.
replay_result replay_strategy(const replay_plan& plan, const std::string& spec);

// A resource that does no work: every allocation returns the same suitably aligned address and
// frees do nothing. Replaying on it measures the replayer itself (the `limit` row).
class limit_resource final : public std::pmr::memory_resource {
 private:
  void* do_allocate(std::size_t bytes, std::size_t alignment) override;
  void do_deallocate(void*, std::size_t, std::size_t) override {}
  bool do_is_equal(const std::pmr::memory_resource& other) const noexcept override {
    return this == &other;
  }
};

}  // namespace pmrkit::trace
