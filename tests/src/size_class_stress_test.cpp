// A stress test in the spirit of mimalloc's test-stress: threads churn random sizes (mostly
// small, some up to the largest class, a few large), keep a working set, hand blocks to each
// other through a shared transfer array (so most frees of those are cross-thread), and check
// every block's byte pattern before freeing it. Threads are replaced every round, so caches
// of exited threads are returned while others run, and blocks left in the transfer array by
// one round are freed by the threads of the next. Sized to take about a second, a few more
// under ThreadSanitizer.
#include <array>
#include <atomic>
#include <catch2/catch.hpp>
#include <cstdint>
#include <cstring>
#include <random>
#include <thread>
#include <vector>

#include "conformance.hpp"
#include "pmrkit/size_class_resource.hpp"
#include "test_resources.hpp"

using pmrkit::size_class_resource;
using pmrkit::size_class_stats;
using pmrkit::size_class_unsync_resource;
using pmrkit::test::check_pattern;
using pmrkit::test::fill_pattern;

namespace {

// The parts of a block that carry a pattern: all of a small block; the first and last KiB of
// a larger one (which is where a neighbour overlapping it would show), so big blocks do not
// turn the test into a memset benchmark.
struct span {
  std::size_t offset;
  std::size_t length;
};
std::array<span, 2> patterned(std::size_t bytes);

// Every block starts with what is needed to check and free it; the rest holds a pattern.
struct block_header {
  std::uint32_t bytes;
  std::uint32_t alignment;
  std::uint64_t seed;
};
constexpr std::size_t header_bytes = sizeof(block_header);

std::array<span, 2> patterned(std::size_t bytes) {
  constexpr std::size_t edge = 1024;
  if (bytes <= header_bytes + 2 * edge)
    return {span{header_bytes, bytes - header_bytes}, span{0, 0}};
  return {span{header_bytes, edge}, span{bytes - edge, edge}};
}

class churner {
 public:
  churner(std::pmr::memory_resource& r, std::uint64_t seed)
      : r_(r), rng_(seed), seed_(seed << 32) {}

  void* make() {
    const unsigned roll = pick(1000);
    std::size_t bytes;
    if (roll < 900) {
      bytes = header_bytes + pick(1024);
    } else if (roll < 980) {
      bytes = header_bytes + pick(16 * 1024);
    } else if (roll < 998) {
      bytes = header_bytes + pick(64 * 1024 - header_bytes);
    } else {
      bytes = 64 * 1024 + 1 + pick(256 * 1024);  // beyond max_pooled: upstream
    }
    const std::size_t alignment = pick(10) == 0 ? 64 : (pick(2) == 0 ? 8 : 16);
    void* p = r_.allocate(bytes, alignment);
    const block_header header{static_cast<std::uint32_t>(bytes),
                              static_cast<std::uint32_t>(alignment), ++seed_};
    std::memcpy(p, &header, sizeof header);
    for (const auto& [offset, length] : patterned(bytes))
      fill_pattern(static_cast<std::byte*>(p) + offset, length, header.seed + offset);
    return p;
  }

  // Checks the pattern, then frees; a damaged block is counted, not freed.
  void check_and_free(void* p) {
    block_header header;
    std::memcpy(&header, p, sizeof header);
    bool intact = reinterpret_cast<std::uintptr_t>(p) % header.alignment == 0;
    for (const auto& [offset, length] : patterned(header.bytes))
      intact = intact && check_pattern(static_cast<std::byte*>(p) + offset, length,
                                       header.seed + offset);
    if (!intact) {
      ++damaged_;
      return;
    }
    r_.deallocate(p, header.bytes, header.alignment);
  }

  void churn(std::size_t steps, std::atomic<void*>* transfer, std::size_t transfer_slots) {
    for (std::size_t i = 0; i < steps; ++i) {
      const unsigned roll = pick(100);
      if (roll < 50 || live_.empty()) {
        live_.push_back(make());
        if (live_.size() > 600) free_at(pick(static_cast<unsigned>(live_.size())));
      } else if (roll < 75 || transfer == nullptr) {
        free_at(pick(static_cast<unsigned>(live_.size())));
      } else {
        // Hand one of ours to whoever next visits the slot; take what was there.
        const unsigned at = pick(static_cast<unsigned>(live_.size()));
        void* theirs = transfer[pick(static_cast<unsigned>(transfer_slots))].exchange(
            live_[at], std::memory_order_acq_rel);
        if (theirs) {
          live_[at] = theirs;
        } else {
          live_[at] = live_.back();
          live_.pop_back();
        }
      }
    }
  }

  void free_all() {
    while (!live_.empty()) free_at(static_cast<unsigned>(live_.size() - 1));
  }
  std::size_t damaged() const { return damaged_; }

 private:
  unsigned pick(unsigned below) {
    return std::uniform_int_distribution<unsigned>(0, below - 1)(rng_);
  }
  void free_at(unsigned i) {
    check_and_free(live_[i]);
    live_[i] = live_.back();
    live_.pop_back();
  }

  std::pmr::memory_resource& r_;
  std::mt19937_64 rng_;
  std::uint64_t seed_;
  std::vector<void*> live_;
  std::size_t damaged_ = 0;
};

template <class Stats>
void check_nothing_live(const Stats& s) {
  for (const auto& c : s.classes) {
    CAPTURE(c.block_size);
    CHECK(c.live_blocks == 0);
    CHECK(c.allocations == c.deallocations);
  }
  CHECK(s.large_live_blocks == 0);
}

}  // namespace

TEST_CASE("size_class stress: threads churn, hand blocks over, and are replaced",
          "[size_class][stress]") {
  constexpr int thread_count = 4;
  constexpr int rounds = 4;
  constexpr std::size_t steps = 12000;
  constexpr std::size_t transfer_slots = 256;

  pmrkit::test::tracking_upstream upstream;
  pmrkit::size_class_options options;
  options.max_retained = 256 * 1024;  // small, so chunks go back and come again under load
  options.thread_cache = 64 * 1024;
  size_class_resource r(options, &upstream);
  std::vector<std::atomic<void*>> transfer(transfer_slots);
  std::atomic<std::size_t> damaged{0};
  std::atomic<std::size_t> inconsistent_stats{0};
  std::atomic<bool> running{true};

  // stats() from a bystander while threads exit under it, and while their stacks' slots move
  // (each stack's count is the distance between two addresses its thread writes): no thread
  // caches more than its budget and the one block an overflow adds.
  std::thread observer([&] {
    while (running.load()) {
      const size_class_stats s = r.stats();
      if (s.bytes_from_upstream > s.peak_bytes_from_upstream) ++inconsistent_stats;
      for (const std::uint64_t cached : s.thread_cached_bytes)
        if (cached > options.thread_cache + options.max_pooled) ++inconsistent_stats;
      std::this_thread::yield();
    }
  });
  for (int round = 0; round < rounds; ++round) {
    std::vector<std::thread> threads;
    for (int t = 0; t < thread_count; ++t) {
      threads.emplace_back([&, t, round] {
        churner c(r, static_cast<std::uint64_t>(round * thread_count + t + 1));
        c.churn(steps, transfer.data(), transfer_slots);
        c.free_all();
        damaged += c.damaged();
      });
    }
    for (auto& t : threads) t.join();
  }
  running = false;
  observer.join();

  churner drain(r, 999);
  for (auto& slot : transfer)
    if (void* p = slot.exchange(nullptr)) drain.check_and_free(p);
  CHECK(drain.damaged() == 0);
  CHECK(damaged.load() == 0);
  CHECK(inconsistent_stats.load() == 0);

  const size_class_stats s = r.stats();
  check_nothing_live(s);
  std::uint64_t allocations = 0;
  for (const auto& c : s.classes) allocations += c.allocations;
  CHECK(allocations > rounds * thread_count * steps / 4);
  CHECK(s.large_allocations > 0);
  CHECK(s.empty_chunk_bytes <= options.max_retained);
  CHECK(s.peak_bytes_from_upstream > s.bytes_from_upstream);  // memory went back
  r.release();
  CHECK(upstream.live_blocks() == 0);
  CHECK(upstream.mismatched_deallocations() == 0);
}

TEST_CASE("size_class stress: the unsync resource under one thread's churn",
          "[size_class][stress]") {
  pmrkit::test::tracking_upstream upstream;
  pmrkit::size_class_options options;
  options.max_retained = 128 * 1024;
  {
    size_class_unsync_resource r(options, &upstream);
    std::vector<std::atomic<void*>> transfer(64);  // to itself: frees in a scrambled order
    churner c(r, 7);
    c.churn(60000, transfer.data(), transfer.size());
    c.free_all();
    for (auto& slot : transfer)
      if (void* p = slot.exchange(nullptr)) c.check_and_free(p);
    CHECK(c.damaged() == 0);
    check_nothing_live(r.stats());
  }
  CHECK(upstream.live_blocks() == 0);
  CHECK(upstream.mismatched_deallocations() == 0);
}
