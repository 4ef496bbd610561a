// pmrkit_size_class_footprint: where the memory a strategy holds goes, on the mixed live set of
// issue 11. 20,000 live blocks of 8..4096 bytes (uniform), churned 400,000 times on one thread
// (free a random block, allocate a random size in its place), then 90% of them freed at random.
// Upstream is a counting_resource, so "held" is what the strategy took from upstream and
// "live" is what the workload asked for (requested bytes, so class rounding counts as overhead).
//
//   build/bench/pmrkit_size_class_footprint [SPEC] [--seed=N]      (SPEC defaults to size_class)
//
// For size_class and size_class_unsync it also splits held memory into: class rounding of the
// live blocks, blocks in thread caches, free blocks in the shared stores (of partly used chunks),
// empty chunks, and each chunk's tail (its header and the slack behind its last block).
#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <memory_resource>
#include <random>
#include <string>
#include <vector>

#include "pmrkit/counting_resource.hpp"
#include "pmrkit/registry.hpp"
#include "pmrkit/size_class_resource.hpp"

namespace {

struct block {
  void* address = nullptr;
  std::size_t bytes = 0;
};

constexpr std::size_t live_blocks = 20'000;
constexpr std::size_t churn_steps = 400'000;
constexpr std::size_t smallest = 8;
constexpr std::size_t largest = 4096;

double mib(std::uint64_t bytes) { return static_cast<double>(bytes) / (1024.0 * 1024.0); }

template <class Resource>
bool print_breakdown(const std::pmr::memory_resource& any, std::uint64_t live_bytes) {
  const auto* pool = dynamic_cast<const Resource*>(&any);
  if (pool == nullptr) return false;
  const pmrkit::size_class_stats s = pool->stats();
  std::uint64_t class_bytes = 0, cached = 0, store_free = 0, empty = 0, tails = 0;
  for (const auto& c : s.classes) {
    class_bytes += c.live_blocks * c.block_size;
    cached += c.cached_blocks * c.block_size;
    tails += c.chunks * (c.chunk_bytes - c.blocks_per_chunk * c.block_size);
  }
  empty = s.empty_chunk_bytes;
  for (const auto& c : s.classes) store_free += c.free_blocks * c.block_size;
  store_free -= std::min(store_free, empty);  // empty chunks are counted on their own line
  const auto line = [&](const char* what, std::uint64_t bytes) {
    std::printf("    %-38s %9.2f MiB  %6.3f x live\n", what, mib(bytes),
                static_cast<double>(bytes) / static_cast<double>(live_bytes));
  };
  line("requested (live)", live_bytes);
  line("class rounding of live blocks", class_bytes - live_bytes);
  line("free blocks in thread caches", cached);
  line("free blocks in partly used chunks", store_free);
  line("empty chunks (within max_retained)", empty);
  line("chunk tails (header + slack)", tails);
  line("held from upstream", s.bytes_from_upstream);
  return true;
}

void report(const char* phase, const std::pmr::memory_resource& strategy,
            const pmrkit::counting_resource& upstream, std::uint64_t live_bytes,
            std::uint64_t peak_live) {
  const pmrkit::allocation_stats held = upstream.stats();
  std::printf("%s: held %.2f MiB, live %.2f MiB: held/live %.3f; peak held %.2f MiB / peak live "
              "%.2f MiB = %.3f\n",
              phase, mib(held.bytes_in_use), mib(live_bytes),
              static_cast<double>(held.bytes_in_use) / static_cast<double>(live_bytes),
              mib(held.peak_bytes_in_use), mib(peak_live),
              static_cast<double>(held.peak_bytes_in_use) / static_cast<double>(peak_live));
  if (!print_breakdown<pmrkit::size_class_resource>(strategy, live_bytes))
    print_breakdown<pmrkit::size_class_unsync_resource>(strategy, live_bytes);
}

}  // namespace

int main(int argc, char** argv) {
  std::string spec = "size_class";
  unsigned seed = 1;
  for (int i = 1; i < argc; ++i) {
    if (std::strncmp(argv[i], "--seed=", 7) == 0)
      seed = static_cast<unsigned>(std::strtoul(argv[i] + 7, nullptr, 10));
    else
      spec = argv[i];
  }
  pmrkit::counting_resource upstream(std::pmr::new_delete_resource());
  auto strategy = pmrkit::make_resource(spec, &upstream);
  std::printf("%s, seed %u\n", spec.c_str(), seed);

  std::mt19937_64 random(seed);
  std::uniform_int_distribution<std::size_t> size_of(smallest, largest);
  std::vector<block> blocks(live_blocks);
  std::uint64_t live = 0, peak_live = 0;
  const auto allocate = [&](block& b) {
    b.bytes = size_of(random);
    b.address = strategy->allocate(b.bytes);
    live += b.bytes;
    peak_live = std::max(peak_live, live);
  };
  const auto free = [&](block& b) {
    strategy->deallocate(b.address, b.bytes);
    live -= b.bytes;
    b = {};
  };

  for (block& b : blocks) allocate(b);
  report("filled", *strategy, upstream, live, peak_live);
  std::uniform_int_distribution<std::size_t> pick(0, live_blocks - 1);
  for (std::size_t step = 0; step < churn_steps; ++step) {
    block& b = blocks[pick(random)];
    free(b);
    allocate(b);
  }
  report("churned (steady state)", *strategy, upstream, live, peak_live);

  std::shuffle(blocks.begin(), blocks.end(), random);
  for (std::size_t i = 0; i < live_blocks * 9 / 10; ++i) free(blocks[i]);
  report("90% freed", *strategy, upstream, live, peak_live);
  if (auto* pool = dynamic_cast<pmrkit::size_class_resource*>(strategy.get())) pool->trim();
  if (auto* pool = dynamic_cast<pmrkit::size_class_unsync_resource*>(strategy.get())) pool->trim();
  report("90% freed, then trim()", *strategy, upstream, live, peak_live);

  for (std::size_t i = live_blocks * 9 / 10; i < live_blocks; ++i) free(blocks[i]);
  return 0;
}
