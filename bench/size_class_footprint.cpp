// pmrkit_size_class_footprint: where the memory a strategy holds goes, on the mixed live set of
// issue 11. 20,000 live blocks of 8..4096 bytes (uniform), churned 400,000 times on one thread
// (free a random block, allocate a random size in its place), then 90% of them freed at random.
// Upstream is a counting_resource, so "held" is what the strategy took from upstream and
// "live" is what the workload asked for (requested bytes, so class rounding counts as overhead).
//
//   build/bench/pmrkit_size_class_footprint [SPEC] [--seed=N]      (SPEC defaults to size_class)
//   build/bench/pmrkit_size_class_footprint [SPEC] --threads=1,8,32,64
//
// --threads is issue 15's pool of worker threads: N threads share one resource, each churns 200
// live blocks of 8..4096 bytes (20,000 replacements), frees everything and parks on a barrier. It
// prints, per N, what the resource holds from upstream with nothing live while the threads are
// parked: at once, and after they have stayed parked for 20 ms (what size_class's sweeper thread
// gives back meanwhile); then while the main thread alone keeps working for 10 ms (bursts of 300
// blocks of 4 KiB, freed again: the slow paths in which size_class sweeps for idle caches; the
// main thread's own cache counts in that column); after trim() on the main thread; and after the
// threads exit.
//
// For size_class and size_class_unsync it also splits held memory into: class rounding of the
// live blocks, blocks in thread caches, free blocks in the shared stores (of partly used chunks),
// empty chunks, each chunk's tail (its header and the slack behind its last block), and the
// caches' slots (their stacks of free blocks' addresses, which come from upstream too). And it
// prints the floor that per-class chunks set: what the classes' chunks would take if each class
// held, perfectly packed, the chunks for its own highest count of live blocks, none of them ever
// moving to another class (docs/size_class.md, "Memory held for what is live").
#include <algorithm>
#include <barrier>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <memory_resource>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include "class_high_water.hpp"
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
    tails += c.chunks * c.chunk_bytes - c.chunk_blocks * c.block_size;
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
  line("caches' slots (addresses)", s.cache_slot_bytes);
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

using pmrkit::bench::class_high_water;

// A size_class strategy's classes; none for any other strategy.
class_high_water::class_table classes_of(const std::pmr::memory_resource& any) {
  if (const auto* pool = dynamic_cast<const pmrkit::size_class_resource*>(&any))
    return pool->stats().classes;
  if (const auto* unsync = dynamic_cast<const pmrkit::size_class_unsync_resource*>(&any))
    return unsync->stats().classes;
  return {};
}

void trim_if_size_class(std::pmr::memory_resource& strategy) {
  if (auto* pool = dynamic_cast<pmrkit::size_class_resource*>(&strategy)) pool->trim();
  if (auto* pool = dynamic_cast<pmrkit::size_class_unsync_resource*>(&strategy)) pool->trim();
}

// One row of the many-threads table: held with nothing live (threads parked), after trim(),
// after the threads exit.
void run_parked_threads(const std::string& spec, unsigned threads, unsigned seed) {
  constexpr std::size_t live_per_thread = 200;
  constexpr std::size_t replacements = 20'000;
  pmrkit::counting_resource upstream(std::pmr::new_delete_resource());
  auto strategy = pmrkit::make_resource(spec, &upstream);
  std::barrier parked(threads + 1);
  std::barrier resume(threads + 1);
  std::vector<std::thread> pool;
  for (unsigned t = 0; t < threads; ++t) {
    pool.emplace_back([&, t] {
      std::mt19937_64 random(seed * 1000 + t);
      std::uniform_int_distribution<std::size_t> size_of(smallest, largest);
      std::uniform_int_distribution<std::size_t> pick(0, live_per_thread - 1);
      std::vector<block> blocks(live_per_thread);
      const auto allocate = [&](block& b) {
        b.bytes = size_of(random);
        b.address = strategy->allocate(b.bytes);
      };
      for (block& b : blocks) allocate(b);
      for (std::size_t step = 0; step < replacements; ++step) {
        block& b = blocks[pick(random)];
        strategy->deallocate(b.address, b.bytes);
        allocate(b);
      }
      for (block& b : blocks) strategy->deallocate(b.address, b.bytes);
      parked.arrive_and_wait();
      resume.arrive_and_wait();
    });
  }
  parked.arrive_and_wait();
  const std::uint64_t held_parked = upstream.stats().bytes_in_use;
  std::uint64_t cached = 0, cache_limits = 0, slots = 0, empty = 0;
  if (auto* size_class = dynamic_cast<pmrkit::size_class_resource*>(strategy.get())) {
    const pmrkit::size_class_stats s = size_class->stats();
    cached = s.cached_bytes;
    cache_limits = s.cache_limit_bytes;
    slots = s.cache_slot_bytes;
    empty = s.empty_chunk_bytes;
  }
  std::this_thread::sleep_for(std::chrono::milliseconds(20));
  const std::uint64_t held_parked_later = upstream.stats().bytes_in_use;
  {
    const auto until = std::chrono::steady_clock::now() + std::chrono::milliseconds(10);
    std::vector<void*> burst;
    while (std::chrono::steady_clock::now() < until) {
      for (int i = 0; i < 300; ++i) burst.push_back(strategy->allocate(4096));
      for (void* p : burst) strategy->deallocate(p, 4096);
      burst.clear();
    }
  }
  const std::uint64_t held_one_working = upstream.stats().bytes_in_use;
  trim_if_size_class(*strategy);
  const std::uint64_t held_trimmed = upstream.stats().bytes_in_use;
  resume.arrive_and_wait();
  for (std::thread& thread : pool) thread.join();
  const std::uint64_t held_exited = upstream.stats().bytes_in_use;
  std::printf("| %u | %.1f MiB | %.1f (%.1f) MiB | %.2f MiB | %.1f MiB | %.1f MiB | %.1f MiB "
              "| %.1f MiB | %.1f MiB |\n",
              threads, mib(held_parked), mib(cached), mib(cache_limits), mib(slots), mib(empty),
              mib(held_parked_later), mib(held_one_working), mib(held_trimmed), mib(held_exited));
}

}  // namespace

int main(int argc, char** argv) {
  std::string spec = "size_class";
  unsigned seed = 1;
  std::vector<unsigned> thread_counts;
  for (int i = 1; i < argc; ++i) {
    if (std::strncmp(argv[i], "--threads=", 10) == 0) {
      for (char* p = argv[i] + 10; *p;) {
        thread_counts.push_back(static_cast<unsigned>(std::strtoul(p, &p, 10)));
        if (*p == ',') ++p;
      }
    } else if (std::strncmp(argv[i], "--seed=", 7) == 0)
      seed = static_cast<unsigned>(std::strtoul(argv[i] + 7, nullptr, 10));
    else
      spec = argv[i];
  }
  if (!thread_counts.empty()) {
    std::printf("%s, seed %u: held from upstream, nothing live\n\n", spec.c_str(), seed);
    std::printf("| threads | threads parked | of it cached (caches' limits) | of it caches' slots "
                "| of it empty chunks | parked 20 ms | then one thread works 10 ms "
                "| then trim() | after the threads exit |\n"
                "|---|---|---|---|---|---|---|---|---|\n");
    for (const unsigned threads : thread_counts) run_parked_threads(spec, threads, seed);
    return 0;
  }
  pmrkit::counting_resource upstream(std::pmr::new_delete_resource());
  auto strategy = pmrkit::make_resource(spec, &upstream);
  std::printf("%s, seed %u\n", spec.c_str(), seed);

  std::mt19937_64 random(seed);
  std::uniform_int_distribution<std::size_t> size_of(smallest, largest);
  std::vector<block> blocks(live_blocks);
  std::uint64_t live = 0, peak_live = 0;
  class_high_water high_water(classes_of(*strategy));
  const auto allocate = [&](block& b) {
    b.bytes = size_of(random);
    b.address = strategy->allocate(b.bytes);
    live += b.bytes;
    peak_live = std::max(peak_live, live);
    high_water.allocated(b.bytes);
  };
  const auto free = [&](block& b) {
    strategy->deallocate(b.address, b.bytes);
    live -= b.bytes;
    high_water.freed(b.bytes);
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
  if (const std::uint64_t floor = high_water.floor_bytes())
    std::printf("    if no chunk ever changed class (each class's highest live count, packed): "
                "%.2f MiB = %.3f x peak live\n",
                mib(floor), static_cast<double>(floor) / static_cast<double>(peak_live));

  std::shuffle(blocks.begin(), blocks.end(), random);
  for (std::size_t i = 0; i < live_blocks * 9 / 10; ++i) free(blocks[i]);
  report("90% freed", *strategy, upstream, live, peak_live);
  trim_if_size_class(*strategy);
  report("90% freed, then trim()", *strategy, upstream, live, peak_live);

  for (std::size_t i = live_blocks * 9 / 10; i < live_blocks; ++i) free(blocks[i]);
  return 0;
}
