// size_class_resource: how much memory it holds for what is live, and what it gives back. The
// workload is issue 11's mixed live set (bench/size_class_footprint.cpp prints its breakdown):
// 20,000 live blocks of 8..4096 bytes churned on one thread, then 90% of them freed at random.
// Deterministic: a fixed seed, one thread, counts of bytes rather than times.
#include <algorithm>
#include <catch2/catch.hpp>
#include <cstdint>
#include <random>
#include <utility>
#include <vector>

#include "class_high_water.hpp"  // bench/: the floor that per-class chunks set
#include "pmrkit/counting_resource.hpp"
#include "pmrkit/size_class_resource.hpp"

using pmrkit::size_class_options;
using pmrkit::size_class_resource;
using pmrkit::size_class_unsync_resource;

namespace {

struct block {
  void* address = nullptr;
  std::size_t bytes = 0;
};

// A live set of `count` blocks of 8..4096 bytes, churned `steps` times (free a random block,
// allocate a random size in its place); tracks the live bytes and their peak, and, given the
// resource's classes, each class's highest count of live blocks.
class mixed_live_set {
 public:
  mixed_live_set(std::pmr::memory_resource& r, std::size_t count,
                 pmrkit::bench::class_high_water::class_table classes = {})
      : r_(r), blocks_(count), high_water_(std::move(classes)) {
    for (block& b : blocks_) allocate(b);
  }
  ~mixed_live_set() {
    for (block& b : blocks_)
      if (b.address) free(b);
  }
  mixed_live_set(const mixed_live_set&) = delete;
  mixed_live_set& operator=(const mixed_live_set&) = delete;

  void churn(std::size_t steps) {
    std::uniform_int_distribution<std::size_t> pick(0, blocks_.size() - 1);
    for (std::size_t i = 0; i < steps; ++i) {
      block& b = blocks_[pick(random_)];
      free(b);
      allocate(b);
    }
  }
  void free_fraction(double fraction) {
    std::shuffle(blocks_.begin(), blocks_.end(), random_);
    const auto n = static_cast<std::size_t>(fraction * static_cast<double>(blocks_.size()));
    for (std::size_t i = 0; i < n; ++i) free(blocks_[i]);
  }
  std::uint64_t live() const { return live_; }
  std::uint64_t peak_live() const { return peak_live_; }
  std::uint64_t floor_bytes() const { return high_water_.floor_bytes(); }

 private:
  void allocate(block& b) {
    b.bytes = size_(random_);
    b.address = r_.allocate(b.bytes);
    live_ += b.bytes;
    peak_live_ = std::max(peak_live_, live_);
    high_water_.allocated(b.bytes);
  }
  void free(block& b) {
    r_.deallocate(b.address, b.bytes);
    live_ -= b.bytes;
    high_water_.freed(b.bytes);
    b = {};
  }

  std::pmr::memory_resource& r_;
  std::vector<block> blocks_;
  std::mt19937_64 random_{1};
  std::uniform_int_distribution<std::size_t> size_{8, 4096};
  std::uint64_t live_ = 0;
  std::uint64_t peak_live_ = 0;
  pmrkit::bench::class_high_water high_water_;
};

double ratio(std::uint64_t held, std::uint64_t live) {
  return static_cast<double>(held) / static_cast<double>(live);
}

}  // namespace

TEMPLATE_TEST_CASE("size_class: a churned mixed live set holds at most 1.15x its live bytes",
                   "[size_class][footprint]", size_class_resource, size_class_unsync_resource) {
  pmrkit::counting_resource upstream;
  TestType r({}, &upstream);
  mixed_live_set set(r, 20'000);
  set.churn(400'000);
  // Peak held over peak live: class rounding (~5.2%), chunk tails, the thread cache and the
  // chunks each class keeps for its own ups and downs. 1.190 before empty chunks were shared
  // between classes and sparse chunks left to drain, 1.178 before eight classes per power of
  // two above 2 KiB, 1.159 before classes up to 4 KiB were widened to fill their chunks, 1.147
  // before 4096 got a companion class of 4080 (now 1.141-1.158 over 24 seeds of the
  // footprint tool; this seed: 1.143).
  const double held_over_live = ratio(upstream.stats().peak_bytes_in_use, set.peak_live());
  CAPTURE(held_over_live);
  CHECK(held_over_live <= 1.15);
}

TEMPLATE_TEST_CASE("size_class: a churned mixed live set holds no more than its classes' floor",
                   "[size_class][footprint]", size_class_resource, size_class_unsync_resource) {
  // Each class's chunks hold only its blocks, so if no chunk ever changed class, the classes
  // would need at least the chunks for each one's own highest count of live blocks, packed.
  // What the resource holds beyond that floor is what its caches and stores waste on top:
  // 0.001x the peak live bytes on every one of 24 seeds of the footprint tool. Chunks that
  // empty and change class may take it below.
  pmrkit::counting_resource upstream;
  TestType r({}, &upstream);
  mixed_live_set set(r, 20'000, r.stats().classes);
  set.churn(400'000);
  const double held_over_live = ratio(upstream.stats().peak_bytes_in_use, set.peak_live());
  const double floor_over_live = ratio(set.floor_bytes(), set.peak_live());
  CAPTURE(held_over_live, floor_over_live);
  CHECK(floor_over_live > 1.1);  // the floor is counted: rounding, tails, the classes' peaks
  CHECK(held_over_live <= floor_over_live + 0.005);
}

TEMPLATE_TEST_CASE("size_class: after 90% of a live set is freed, empty chunks go back",
                   "[size_class][footprint]", size_class_resource, size_class_unsync_resource) {
  pmrkit::counting_resource upstream;
  size_class_options options;
  options.max_retained = 1 << 20;
  TestType r(options, &upstream);
  mixed_live_set set(r, 20'000);
  set.churn(100'000);
  const std::uint64_t before = upstream.stats().bytes_in_use;
  set.free_fraction(0.9);

  // Chunks that empty leave their class; beyond max_retained they go back to upstream at once.
  const std::uint64_t after_free = upstream.stats().bytes_in_use;
  CHECK(r.stats().empty_chunk_bytes <= options.max_retained);
  CHECK(after_free < before);
  // trim() gives this thread's cached blocks back and every empty chunk with them.
  r.trim();
  const pmrkit::size_class_stats s = r.stats();
  const std::uint64_t after_trim = upstream.stats().bytes_in_use;
  CHECK(s.empty_chunk_bytes == 0);
  std::uint64_t in_chunks = 0;
  for (const auto& c : s.classes) {
    CHECK(c.cached_blocks == 0);
    in_chunks += c.chunks * c.chunk_bytes;
  }
  CHECK(after_trim == in_chunks);  // no large blocks here: every byte held is a chunk in use
  CHECK(after_trim < after_free);
  // What stays is chunks with a live block: with ~20 blocks a chunk, a chunk of the large
  // classes empties with probability 0.9^20 (12%); one of 64-byte blocks practically never.
  CHECK(ratio(after_trim, set.live()) > 5.0);
  CAPTURE(before, after_free, after_trim);
  CHECK(after_trim * 100 < before * 92);  // 89% here; every chunk stayed before (100%)
}

TEMPLATE_TEST_CASE("size_class: an empty chunk of one class serves another",
                   "[size_class][footprint]", size_class_resource, size_class_unsync_resource) {
  pmrkit::counting_resource upstream;
  size_class_options options;
  options.thread_cache = 0;  // every free reaches its chunk
  TestType r(options, &upstream);
  const auto burst = [&](std::size_t bytes) {
    std::vector<void*> blocks;
    for (int i = 0; i < 300; ++i) blocks.push_back(r.allocate(bytes, 8));
    for (void* p : blocks) r.deallocate(p, bytes, 8);
  };
  burst(1000);  // 1024-byte class, 64 KiB chunks: all of them empty at the end
  const pmrkit::size_class_stats after_first = r.stats();
  CHECK(after_first.empty_chunk_bytes == upstream.stats().bytes_in_use);
  const auto chunks_taken = upstream.stats().allocations;
  burst(700);  // 768-byte class, same chunk size: served by the chunks the first burst left
  CHECK(upstream.stats().allocations == chunks_taken);
  CHECK(r.stats().empty_chunk_bytes == after_first.empty_chunk_bytes);
}
