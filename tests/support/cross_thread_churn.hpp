// One churn for the tests that make threads free each other's blocks: each thread allocates
// blocks of random size, writes a pattern over each, hands every third to the next thread's
// mailbox and frees what arrives in its own, keeping at most `keep` blocks of its own live.
// Every block is checked for its pattern before it is freed, so a resource that hands one block
// to two owners shows up as corruption. The caller says how to free (a checked resource's
// caller may expect errors).
#pragma once

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <memory_resource>
#include <random>
#include <thread>
#include <vector>

#include "block_mailbox.hpp"
#include "test_resources.hpp"

namespace pmrkit::test {

struct churn_plan {
  int threads = 4;
  int steps_per_thread = 5000;
  std::size_t min_bytes = 1;
  std::size_t max_bytes = 3000;
  std::size_t keep = 64;      // blocks a thread keeps live before freeing its oldest
  unsigned seed_base = 1;     // thread t draws sizes from mt19937(seed_base + t)
};

inline constexpr std::size_t churn_alignment = 16;

// Runs the churn; returns how many blocks had lost their pattern when freed. `free_block(b)`
// must deallocate b.p (b.bytes, churn_alignment) from `r`.
template <class FreeBlock>
int cross_thread_churn(std::pmr::memory_resource& r, const churn_plan& plan, FreeBlock free_block) {
  std::atomic<int> corrupted{0};
  std::vector<block_mailbox> boxes(static_cast<std::size_t>(plan.threads));
  const auto release = [&](const handed_block& b) {
    if (!check_pattern(b.p, b.bytes, b.seed)) ++corrupted;
    free_block(b);
  };
  std::vector<std::thread> workers;
  for (int t = 0; t < plan.threads; ++t) {
    workers.emplace_back([&, t] {
      std::mt19937 rng(plan.seed_base + static_cast<unsigned>(t));
      std::uniform_int_distribution<std::size_t> size(plan.min_bytes, plan.max_bytes);
      std::vector<handed_block> mine;
      std::uint64_t seed = static_cast<std::uint64_t>(t) << 40;
      for (int i = 0; i < plan.steps_per_thread; ++i) {
        const std::size_t bytes = size(rng);
        void* p = r.allocate(bytes, churn_alignment);
        fill_pattern(p, bytes, ++seed);
        const handed_block b{p, bytes, seed};
        if (i % 3 == 0)  // the next thread frees it
          boxes[static_cast<std::size_t>((t + 1) % plan.threads)].put(b);
        else
          mine.push_back(b);
        handed_block incoming;
        if (boxes[static_cast<std::size_t>(t)].take(incoming)) release(incoming);
        if (mine.size() > plan.keep) {
          release(mine.front());
          mine.erase(mine.begin());
        }
      }
      for (const auto& b : mine) release(b);
    });
  }
  for (auto& w : workers) w.join();
  for (auto& box : boxes) {
    handed_block b;
    while (box.take(b)) release(b);
  }
  return corrupted.load();
}

}  // namespace pmrkit::test
