#include "pmrkit/trace/replay.hpp"

#include <algorithm>
#include <atomic>
#include <exception>
#include <functional>
#include <memory>
#include <mutex>
#include <queue>
#include <stdexcept>
#include <string>
#include <thread>
#include <utility>

#include "pmrkit/counting_resource.hpp"
#include "pmrkit/registry.hpp"

namespace pmrkit::trace {

replay_plan::replay_plan(const recorded_trace& trace)
    : threads_(trace.threads),
      objects_(trace.objects),
      peak_live_bytes_(trace.peak_live_bytes),
      live_bytes_at_end_(trace.live_bytes_at_end) {
  std::vector<std::uint32_t> allocated_on(trace.objects);
  for (const operation& op : trace.operations) {
    const bool allocate = op.kind == operation_kind::allocate;
    if (allocate) allocated_on[op.object] = op.thread;
    else if (allocated_on[op.object] != op.thread) ++cross_thread_frees_;
    threads_[op.thread].push_back({op.object, op.size, op.alignment_log2, allocate});
  }
  operations_ = trace.operations.size();
  lanes_ = lanes_of(trace);
}

// Interval partitioning: threads in the order they start, each into the lane that ended
// earliest if it ended before this thread started, else into a new lane. That takes the
// fewest lanes, as many as the most threads alive at one point of the trace.
std::vector<std::vector<std::uint32_t>> replay_plan::lanes_of(const recorded_trace& trace) {
  constexpr std::uint64_t none = ~std::uint64_t{0};
  std::vector<std::uint64_t> first(trace.threads, none);
  std::vector<std::uint64_t> last(trace.threads, 0);
  for (std::uint64_t i = 0; i < trace.operations.size(); ++i) {
    const std::uint32_t t = trace.operations[i].thread;
    if (first[t] == none) first[t] = i;
    last[t] = i;
  }
  std::vector<std::uint32_t> by_start;
  for (std::uint32_t t = 0; t < trace.threads; ++t)
    if (first[t] != none) by_start.push_back(t);
  std::sort(by_start.begin(), by_start.end(),
            [&](std::uint32_t a, std::uint32_t b) { return first[a] < first[b]; });
  std::vector<std::vector<std::uint32_t>> lanes;
  // (the last operation of a lane's latest thread, the lane), earliest first.
  using lane_end = std::pair<std::uint64_t, std::size_t>;
  std::priority_queue<lane_end, std::vector<lane_end>, std::greater<>> ends;
  for (const std::uint32_t t : by_start) {
    std::size_t lane;
    if (!ends.empty() && ends.top().first < first[t]) {
      lane = ends.top().second;
      ends.pop();
    } else {
      lane = lanes.size();
      lanes.emplace_back();
    }
    lanes[lane].push_back(t);
    ends.emplace(last[t], lane);
  }
  return lanes;
}

namespace {

// What the replay threads share: each object's block, published by the thread that allocates
// it for the one that frees it, and the first error.
struct shared_state {
  explicit shared_state(std::uint64_t objects) : blocks(new std::atomic<void*>[objects]()) {}
  std::unique_ptr<std::atomic<void*>[]> blocks;
  std::atomic<bool> go{false};
  std::atomic<bool> failed{false};
  std::mutex error_mutex;
  std::string error;
};

// One trace thread's operations, in its order. Every 64 operations it looks whether another
// thread failed, so that a failed replay ends soon rather than after the whole trace.
void replay_thread(const std::vector<replay_plan::step>& steps, std::uint32_t thread,
                   std::pmr::memory_resource& resource, shared_state& shared) {
  std::uint64_t index = 0;
  try {
    for (const replay_plan::step& s : steps) {
      if (index % 64 == 0 && shared.failed.load(std::memory_order_relaxed)) return;
      std::atomic<void*>& block = shared.blocks[s.object];
      const std::size_t alignment = std::size_t{1} << s.alignment_log2;
      if (s.allocate) {
        block.store(resource.allocate(s.size, alignment), std::memory_order_release);
      } else {
        void* p = block.load(std::memory_order_acquire);
        // Allocated on another thread that has not got there yet: wait (spin a little, then
        // let it run: there may be fewer cores than threads).
        for (unsigned spins = 0; p == nullptr; ++spins) {
          if (shared.failed.load(std::memory_order_relaxed)) return;
          if (spins > 64) std::this_thread::yield();
          p = block.load(std::memory_order_acquire);
        }
        block.store(nullptr, std::memory_order_relaxed);
        resource.deallocate(p, s.size, alignment);
      }
      ++index;
    }
  } catch (const std::exception& e) {
    const std::lock_guard lock(shared.error_mutex);
    if (shared.error.empty())
      shared.error = "replay: operation " + std::to_string(index) + " of thread " +
                     std::to_string(thread) + " (" +
                     (steps[index].allocate ? "allocate " : "deallocate ") +
                     std::to_string(steps[index].size) + " bytes) failed: " + e.what();
    shared.failed.store(true, std::memory_order_relaxed);
  }
}

// A lane's trace threads, one after another.
void replay_lane(const replay_plan& plan, const std::vector<std::uint32_t>& lane,
                 std::pmr::memory_resource& resource, shared_state& shared) {
  while (!shared.go.load(std::memory_order_acquire)) std::this_thread::yield();
  for (const std::uint32_t t : lane) {
    if (shared.failed.load(std::memory_order_relaxed)) return;
    replay_thread(plan.threads()[t], t, resource, shared);
  }
}

// Blocks the program never freed (or a failed replay left), returned with their own size.
void return_live_blocks(const replay_plan& plan, std::pmr::memory_resource& resource,
                        shared_state& shared) noexcept {
  for (const auto& steps : plan.threads())
    for (const replay_plan::step& s : steps)
      if (s.allocate)
        if (void* p = shared.blocks[s.object].exchange(nullptr))
          resource.deallocate(p, s.size, std::size_t{1} << s.alignment_log2);
}

}  // namespace

replay_result replay(const replay_plan& plan, std::pmr::memory_resource& resource) {
  shared_state shared(plan.objects());
  const auto& lanes = plan.lanes();
  std::chrono::steady_clock::duration elapsed{};
  if (lanes.size() <= 1) {
    // One lane runs on the calling thread: no thread to start, and a resource that belongs to
    // the thread that made it is used there.
    shared.go.store(true, std::memory_order_relaxed);
    const auto start = std::chrono::steady_clock::now();
    if (!lanes.empty()) replay_lane(plan, lanes.front(), resource, shared);
    elapsed = std::chrono::steady_clock::now() - start;
  } else {
    std::vector<std::thread> threads;
    threads.reserve(lanes.size());
    try {
      for (const auto& lane : lanes)
        threads.emplace_back(replay_lane, std::cref(plan), std::cref(lane), std::ref(resource),
                             std::ref(shared));
    } catch (...) {
      shared.failed.store(true);
      shared.go.store(true, std::memory_order_release);
      for (auto& th : threads) th.join();
      return_live_blocks(plan, resource, shared);
      throw;
    }
    const auto start = std::chrono::steady_clock::now();
    shared.go.store(true, std::memory_order_release);
    for (auto& th : threads) th.join();
    elapsed = std::chrono::steady_clock::now() - start;
  }
  return_live_blocks(plan, resource, shared);
  if (shared.failed.load()) throw std::runtime_error(shared.error);

  replay_result result;
  result.operations = plan.operations();
  result.threads = static_cast<std::uint32_t>(plan.threads().size());
  result.replay_threads = static_cast<std::uint32_t>(lanes.size());
  result.elapsed = std::chrono::duration_cast<std::chrono::nanoseconds>(elapsed);
  result.peak_live_bytes = plan.peak_live_bytes();
  return result;
}

replay_result replay_strategy(const replay_plan& plan, const std::string& spec) {
  const strategy_info info = describe_strategy(spec);
  if (plan.lanes().size() > 1 && !info.thread_safe)
    throw std::invalid_argument("replay: " + spec + " is not thread-safe and the trace has " +
                                std::to_string(plan.lanes().size()) +
                                " threads alive at once (replay it with a thread-safe strategy)");
  counting_resource upstream(std::pmr::new_delete_resource());
  replay_result result;
  {
    const auto resource = make_resource(spec, &upstream);
    result = replay(plan, *resource);
  }
  if (info.uses_upstream) result.peak_held_bytes = upstream.stats().peak_bytes_in_use;
  return result;
}

void* limit_resource::do_allocate(std::size_t, std::size_t alignment) {
  // Never written to, so one address serves every block; a larger alignment is met by the
  // alignment's own value, a suitably aligned address that is never dereferenced.
  alignas(4096) static unsigned char somewhere[1];
  if (alignment <= 4096) return somewhere;
  return reinterpret_cast<void*>(alignment);
}

}  // namespace pmrkit::trace
