// size_class_resource in a service with many threads (issue 15): trim() takes the caches of
// parked threads, the caches of a resource share max_cached_total (and one over its share
// shrinks to it at its next slow path), whose default leaves sixteen threads their whole
// thread_cache, a busy thread takes the share of threads that went idle, the caches of
// threads that stay idle go back without trim() (those of threads that pause and come back
// soon, after more idle sweeps), and so do the empty chunks of a resource whose threads are
// all idle, down to idle_retained.
#include <atomic>
#include <barrier>
#include <catch2/catch.hpp>
#include <chrono>
#include <cstdint>
#include <limits>
#include <memory_resource>
#include <random>
#include <thread>
#include <utility>
#include <vector>

#include "pmrkit/counting_resource.hpp"
#include "pmrkit/size_class_resource.hpp"

using pmrkit::size_class_options;
using pmrkit::size_class_resource;
using pmrkit::size_class_stats;

namespace {

constexpr std::size_t mib = 1024 * 1024;

struct block {
  void* address = nullptr;
  std::size_t bytes = 0;
};

// Issue 15's worker: 200 live blocks of 8..4096 bytes churned 20,000 times; the first `keep`
// stay live and are returned, the rest are freed.
std::vector<block> churn(std::pmr::memory_resource& pool, unsigned seed, std::size_t keep) {
  std::mt19937_64 random(seed);
  std::uniform_int_distribution<std::size_t> size_of(8, 4096);
  std::uniform_int_distribution<std::size_t> pick(0, 199);
  std::vector<block> blocks(200);
  const auto allocate = [&](block& b) {
    b.bytes = size_of(random);
    b.address = pool.allocate(b.bytes);
  };
  for (block& b : blocks) allocate(b);
  for (int step = 0; step < 20'000; ++step) {
    block& b = blocks[pick(random)];
    pool.deallocate(b.address, b.bytes);
    allocate(b);
  }
  for (std::size_t i = keep; i < blocks.size(); ++i)
    pool.deallocate(blocks[i].address, blocks[i].bytes);
  blocks.resize(keep);
  return blocks;
}

// Runs `threads` workers that each churn (nothing kept) and park; calls while_parked() on this
// thread while they are parked, lets them exit, and returns what it returned. With
// caches_first, every worker has its cache before any churns: the pool as it runs once started.
// (A cache that grew while it was alone shrinks to its share only at its next slow path, so a
// thread that starts first and never misses again keeps more; see docs.)
template <class WhileParked>
auto with_parked_workers(std::pmr::memory_resource& pool, unsigned threads, bool caches_first,
                         WhileParked while_parked) {
  std::barrier arrived(threads);
  std::barrier step(threads + 1);
  std::vector<std::thread> workers;
  for (unsigned t = 0; t < threads; ++t) {
    workers.emplace_back([&, t] {
      if (caches_first) {
        pool.deallocate(pool.allocate(64), 64);
        arrived.arrive_and_wait();
      }
      churn(pool, t + 1, 0);
      step.arrive_and_wait();  // parked, nothing live
      step.arrive_and_wait();
    });
  }
  step.arrive_and_wait();
  auto result = while_parked();
  step.arrive_and_wait();
  for (std::thread& worker : workers) worker.join();
  return result;
}

// A burst of 300 blocks of 4 KiB, freed again: more than a class may cache (half of the default
// thread_cache), so every burst refills and overflows, taking slow paths.
void burst_of_4k_blocks(std::pmr::memory_resource& pool) {
  std::vector<void*> blocks;
  for (int i = 0; i < 300; ++i) blocks.push_back(pool.allocate(4096));
  for (void* p : blocks) pool.deallocate(p, 4096);
}

std::uint64_t sum(const std::vector<std::uint64_t>& values) {
  std::uint64_t total = 0;
  for (const std::uint64_t v : values) total += v;
  return total;
}

}  // namespace

TEST_CASE("size_class: trim() takes the caches of 64 parked threads", "[size_class][threads]") {
  constexpr unsigned threads = 64;
  pmrkit::counting_resource upstream(std::pmr::new_delete_resource());
  size_class_options options;
  options.cache_idle_time = {};  // no idle sweeps: every thread still has its cache for trim()
  size_class_resource pool(options, &upstream);
  std::barrier step(threads + 1);
  std::vector<std::thread> workers;
  for (unsigned t = 0; t < threads; ++t) {
    workers.emplace_back([&, t] {
      std::vector<block> live = churn(pool, t + 1, 5);  // 5 blocks stay live
      step.arrive_and_wait();  // 1: parked, caches full
      step.arrive_and_wait();  // 2: trimmed; the caches are gone, the resource still works
      for (const block& b : live) pool.deallocate(b.address, b.bytes);
      step.arrive_and_wait();  // 3: everything freed
      step.arrive_and_wait();  // 4: exit
    });
  }
  step.arrive_and_wait();
  const size_class_stats parked = pool.stats();
  CHECK(parked.thread_cached_bytes.size() == threads);
  CHECK(sum(parked.thread_cached_bytes) == parked.cached_bytes);
  CHECK(parked.cached_bytes > 0);

  pool.trim();
  const size_class_stats trimmed = pool.stats();
  CHECK(trimmed.cached_bytes == 0);
  CHECK(trimmed.cache_limit_bytes == 0);
  CHECK(trimmed.thread_cached_bytes.empty());
  CHECK(trimmed.empty_chunk_bytes == 0);
  // What is left is the chunks of the 320 live blocks: at most one 64 KiB chunk each.
  CHECK(upstream.stats().bytes_in_use <= threads * 5 * 64 * 1024);
  CHECK(upstream.stats().bytes_in_use < parked.bytes_from_upstream);
  std::uint64_t live_blocks = 0;
  for (const auto& c : trimmed.classes) live_blocks += c.live_blocks;
  CHECK(live_blocks == threads * 5);

  step.arrive_and_wait();  // the threads free their live blocks, through new caches
  step.arrive_and_wait();
  pool.trim();
  CHECK(upstream.stats().bytes_in_use == 0);  // nothing live: nothing held
  step.arrive_and_wait();
  for (std::thread& worker : workers) worker.join();
  CHECK(pool.stats().cached_bytes == 0);
}

TEST_CASE("size_class: the caches of 64 threads share max_cached_total", "[size_class][threads]") {
  constexpr unsigned threads = 64;
  const auto parked_pool = [&](const size_class_options& options) {
    pmrkit::counting_resource upstream(std::pmr::new_delete_resource());
    size_class_resource pool(options, &upstream);
    return with_parked_workers(pool, threads, true, [&] { return pool.stats(); });
  };
  size_class_options options;
  options.cache_idle_time = {};  // no idle sweeps: the share alone bounds the caches
  // 128 KiB a cache, a quarter of the default's share: far enough below what 64 unbounded
  // caches keep for the bound's effect to stand out from the caches' 16 KiB floors.
  options.max_cached_total = 8 * mib;
  const size_class_stats bounded = parked_pool(options);
  INFO("held " << bounded.bytes_from_upstream << ", cached " << bounded.cached_bytes
               << ", limits " << bounded.cache_limit_bytes);
  // Each cache may always have 16 KiB, and one growth step (up to 32 KiB) may race past the
  // share; beyond that the caches' limits add up to max_cached_total.
  CHECK(bounded.cache_limit_bytes <= options.max_cached_total + threads * (16 + 32) * 1024);
  CHECK(bounded.cached_bytes <= bounded.cache_limit_bytes + threads * 4096);

  size_class_options unbounded = options;
  unbounded.max_cached_total = std::numeric_limits<std::size_t>::max();
  const size_class_stats old = parked_pool(unbounded);
  CHECK(old.cached_bytes > 4 * bounded.cached_bytes);
  CHECK(old.bytes_from_upstream > 3 * bounded.bytes_from_upstream / 2);
}

// The default total is sized for a 16-core machine's busy threads: with 16 caches each still
// grows to its whole thread_cache. Under the old 8 MiB they got 512 KiB each, and on 16 cores
// mixed sizes ran at a seventh of the speed (docs/size_class.md, "Sixteen cores").
TEST_CASE("size_class: by default, sixteen busy threads each keep a whole thread_cache",
          "[size_class][threads]") {
  constexpr unsigned threads = 16;
  size_class_options options;
  options.cache_idle_time = {};  // no idle sweeps: the caches stay while this thread reads them
  size_class_resource pool(options);
  std::barrier step(threads + 1);
  std::vector<std::thread> workers;
  for (unsigned t = 0; t < threads; ++t) {
    workers.emplace_back([&] {
      pool.deallocate(pool.allocate(64), 64);  // every cache made before any grows
      step.arrive_and_wait();
      // Two classes of about 1 MiB of limit each (half a thread_cache at most per class),
      // grown by refills and kept in use together, so neither is scavenged.
      std::vector<void*> blocks;
      for (int round = 0; round < 20; ++round) {
        for (const std::size_t size : {4096, 3072}) {
          for (int i = 0; i < 400; ++i) blocks.push_back(pool.allocate(size));
          for (void* p : blocks) pool.deallocate(p, size);
          blocks.clear();
        }
      }
      step.arrive_and_wait();  // parked, limits grown
      step.arrive_and_wait();
    });
  }
  step.arrive_and_wait();
  step.arrive_and_wait();
  const size_class_stats parked = pool.stats();
  step.arrive_and_wait();
  for (std::thread& worker : workers) worker.join();
  INFO("limits " << parked.cache_limit_bytes << " over " << threads << " caches, total "
                 << options.max_cached_total);
  CHECK(parked.thread_cached_bytes.size() == threads);
  // Each cache's two classes grew to at least three quarters of its thread_cache; with 512 KiB
  // a cache the limits could not add up to more than 8 MiB and the caches' overshoot.
  CHECK(parked.cache_limit_bytes >= threads * options.thread_cache * 3 / 4);
  CHECK(parked.cache_limit_bytes <= options.max_cached_total + threads * (16 + 32) * 1024);
}

// A cache that grew while its thread was alone shrinks to its share at its next slow path once
// more threads came, all the way: a victim's limit is halved, so one pass over the classes
// is not always enough.
TEST_CASE("size_class: a cache over its share shrinks to it at its next slow path",
          "[size_class][threads]") {
  constexpr unsigned newcomers = 15;
  size_class_options options;
  options.max_cached_total = 1 * mib;  // this thread alone: 1 MiB; with 16 caches: 64 KiB each
  options.cache_idle_time = {};         // no idle sweeps: only the share moves the limits
  size_class_resource pool(options);
  std::vector<void*> blocks;
  for (int round = 0; round < 8; ++round) {
    for (const std::size_t size : {64, 128, 256, 512, 1024, 2048, 3072, 4096}) {
      for (int i = 0; i < 100; ++i) blocks.push_back(pool.allocate(size));
      for (void* p : blocks) pool.deallocate(p, size);
      blocks.clear();
    }
  }
  const size_class_stats alone = pool.stats();
  REQUIRE(alone.cache_limit_bytes > options.max_cached_total / 2);

  std::barrier arrived(newcomers + 1);
  std::vector<std::thread> threads;
  for (unsigned t = 0; t < newcomers; ++t) {
    threads.emplace_back([&] {
      pool.deallocate(pool.allocate(64), 64);  // a cache with one block
      arrived.arrive_and_wait();               // made
      arrived.arrive_and_wait();               // checked
    });
  }
  arrived.arrive_and_wait();
  // One slow path: the first request of a class this thread never used misses its cache.
  pool.deallocate(pool.allocate(8), 8);
  const size_class_stats crowded = pool.stats();
  arrived.arrive_and_wait();
  for (std::thread& t : threads) t.join();
  INFO("limits alone " << alone.cache_limit_bytes << ", after one slow path among 16 caches "
                       << crowded.cache_limit_bytes);
  // The share (64 KiB) and the newcomers' one-block limits.
  CHECK(crowded.cache_limit_bytes <= 64 * 1024 + newcomers * 1024);
}

TEST_CASE("size_class: a busy thread takes the share of threads that went idle",
          "[size_class][threads]") {
  constexpr unsigned idle_threads = 8;
  size_class_options options;
  options.max_cached_total = 1 * mib;  // a ninth each while all nine have caches
  pmrkit::counting_resource upstream(std::pmr::new_delete_resource());
  size_class_resource pool(options, &upstream);
  // The idle threads may already have taken each other's caches when they park. This thread
  // then bursts: it keeps asking to grow, and sweeps for idle caches once cache_idle_time has
  // passed. The deadline only ends a run that would otherwise not end.
  const size_class_stats busy_end = with_parked_workers(pool, idle_threads, false, [&] {
    const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(20);
    size_class_stats now;
    do {
      for (int round = 0; round < 50; ++round) burst_of_4k_blocks(pool);
      now = pool.stats();
    } while ((now.thread_cached_bytes.size() > 1 ||
              now.cache_limit_bytes <= options.max_cached_total / 2) &&
             std::chrono::steady_clock::now() < deadline);
    return now;
  });
  // The idle caches were taken; the busy thread's limits grew past a ninth of the total.
  CHECK(busy_end.thread_cached_bytes.size() == 1);
  CHECK(busy_end.cache_limit_bytes > options.max_cached_total / 2);
  pool.trim();
  CHECK(upstream.stats().bytes_in_use == 0);
}

TEST_CASE("size_class: the caches of idle threads go back without trim()",
          "[size_class][threads]") {
  // Issue 15's pool: 64 threads churn, free everything and park. While one thread still works,
  // the parked threads' caches are taken once idle, and with them the chunks they pinned.
  constexpr unsigned threads = 64;
  const auto held_after_parking = [&](const size_class_options& options) {
    pmrkit::counting_resource upstream(std::pmr::new_delete_resource());
    size_class_resource pool(options, &upstream);
    // This thread keeps taking slow paths until no other cache is left; with sweeps off, until
    // the deadline.
    return with_parked_workers(pool, threads, false, [&] {
      const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(2);
      size_class_stats now;
      do {
        burst_of_4k_blocks(pool);
        now = pool.stats();
      } while (now.thread_cached_bytes.size() > 1 && std::chrono::steady_clock::now() < deadline);
      return std::pair{now, upstream.stats().bytes_in_use};
    });
  };
  // The defaults (idle after 1 ms), but for max_retained at its old default: this thread keeps
  // working, so the resource is never idle and keeps what empties up to max_retained, which at
  // 16 MiB would hide what the parked caches pin.
  size_class_options options;
  options.max_retained = 4 * mib;
  const auto [swept, held] = held_after_parking(options);
  INFO("held " << held << ", cached " << swept.cached_bytes);
  // This thread's own, unless the sweeper thread took that too: with the defaults it sweeps
  // every 4 ms, and a sanitizer run on a loaded machine can keep this thread off the processor
  // for two sweeps (1 in 30 runs of three copies at once on 2 cores).
  CHECK(swept.thread_cached_bytes.size() <= 1);
  // Empty chunks within max_retained, and this thread's 4 KiB class (at most half of
  // thread_cache cached, and its chunks): nothing else is pinned.
  CHECK(held <= options.max_retained + options.thread_cache / 2 + 1 * mib);

  size_class_options never = options;
  never.cache_idle_time = {};
  const auto [kept, held_kept] = held_after_parking(never);
  CHECK(kept.thread_cached_bytes.size() == threads + 1);
  CHECK(held_kept > held + 4 * mib);
}

TEST_CASE("size_class: the sweeper thread takes the caches of 64 parked threads",
          "[size_class][threads]") {
  // Issue 15's pool with no thread working at all once the workers park: only the resource's
  // own sweeper thread can take their caches. The deadline only ends a run that would
  // otherwise not end; a parked cache goes back within two cache_idle_times of its last use.
  constexpr unsigned threads = 64;
  const auto parked = [&](const size_class_options& options, std::chrono::milliseconds wait) {
    pmrkit::counting_resource upstream(std::pmr::new_delete_resource());
    size_class_resource pool(options, &upstream);
    return with_parked_workers(pool, threads, false, [&] {
      // Until what is held is what no cache pins: a taken cache leaves the list before its
      // blocks are back.
      const auto deadline = std::chrono::steady_clock::now() + wait;
      std::uint64_t held = 0;
      size_class_stats now;
      do {
        std::this_thread::sleep_for(std::chrono::milliseconds(1));
        now = pool.stats();
        held = upstream.stats().bytes_in_use;
      } while ((held > options.idle_retained || !now.thread_cached_bytes.empty()) &&
               std::chrono::steady_clock::now() < deadline);
      return std::pair{now, held};
    });
  };
  const size_class_options options;  // the defaults: a sweeper, idle after 1 ms
  const auto [swept, held] = parked(options, std::chrono::seconds(20));
  INFO("held " << held << ", cached " << swept.cached_bytes);
  CHECK(swept.thread_cached_bytes.empty());
  CHECK(swept.cached_bytes == 0);
  // Nothing is live and no cache is left, so the resource is idle: what stays is empty chunks,
  // within idle_retained (4 MiB), though max_retained (16 MiB) kept more while threads worked.
  CHECK(held <= options.idle_retained);
  CHECK(swept.empty_chunk_bytes == held);

  // Without the sweeper, the threads that parked last keep their caches: no thread of the
  // resource takes a slow path after them. 100 ms is 100 cache_idle_times.
  size_class_options no_sweeper = options;
  no_sweeper.sweeper_thread = false;
  const auto [kept, held_kept] = parked(no_sweeper, std::chrono::milliseconds(100));
  INFO("without the sweeper: held " << held_kept << ", cached " << kept.cached_bytes);
  CHECK(!kept.thread_cached_bytes.empty());
  CHECK(held_kept > held);
}

TEST_CASE("size_class: the sweeper thread leaves a thread that runs from its cache alone",
          "[size_class][threads]") {
  // A thread that allocates and frees one block, always from its cache (no slow path), is
  // busy, not idle: its cache stays while the sweeper sweeps. Its allocation count is what
  // tells the sweeper so. cache_idle_time 50 ms (the sweeper then sweeps every 200 ms), so that
  // only a thread kept off the processor that long (this one does nothing else) could look
  // idle. (At 5 ms, a sanitizer run on a loaded 2-core machine starved it that long, 2 in 60.)
  size_class_options options;
  options.cache_idle_time = std::chrono::milliseconds(50);
  size_class_resource pool(options);
  const auto cached_64 = [&] {
    for (const auto& c : pool.stats().classes)
      if (c.block_size == 64) return c.cached_blocks;
    FAIL("no 64-byte class");
    return std::uint64_t{0};
  };
  // A second thread with a cache (of another class) starts the sweeper; it stays, parked.
  std::barrier parked(2);
  std::thread other([&] {
    pool.deallocate(pool.allocate(512), 512);
    parked.arrive_and_wait();
    parked.arrive_and_wait();
  });
  parked.arrive_and_wait();
  // This thread's cache, its 64-byte class grown past one block.
  for (int round = 0; round < 4; ++round) {
    std::vector<void*> blocks;
    for (int i = 0; i < 8; ++i) blocks.push_back(pool.allocate(64));
    for (void* p : blocks) pool.deallocate(p, 64);
  }
  const std::uint64_t cached_before = cached_64();
  REQUIRE(cached_before > 1);
  // Several sweeps long; nothing in the loop but this thread's own calls.
  const auto until = std::chrono::steady_clock::now() + std::chrono::milliseconds(1000);
  while (std::chrono::steady_clock::now() < until)
    for (int i = 0; i < 1000; ++i) pool.deallocate(pool.allocate(64), 64);
  const std::uint64_t cached_after = cached_64();
  const std::size_t caches = pool.stats().thread_cached_bytes.size();
  parked.arrive_and_wait();
  other.join();
  // Taken, this thread's cache would have given its 64-byte blocks back to the store, and the
  // new one would hold what one block at a time leaves in it (one or none), not the eight.
  // The parked thread's cache went back.
  CHECK(cached_after == cached_before);
  CHECK(caches == 1);
}

TEST_CASE("size_class: a thread back soon after its cache was taken keeps its next one longer",
          "[size_class][threads]") {
  // A worker that pauses between bursts (it reads what it built, or waits on a socket) is idle
  // to the sweeps. Once it has come back soon after a sweep took its cache, its next caches
  // wait for twice as many idle sweeps, up to eight (size_class_idle_grace.hpp). The sweeps
  // come from this thread's slow paths, at most one a cache_idle_time (10 ms; no sweeper
  // thread), so a pause shorter than 40 ms sees at most three, the first of which still sees
  // the burst: they take a cache that waits for one or two idle sweeps, never one that waits
  // for four. Without the grace, every pause lost the cache.
  // A machine too loaded to keep the pauses short gets another try (a pause past 160 ms, 16
  // cache_idle_times, also starts the worker's grace over).
  size_class_options options;
  options.cache_idle_time = std::chrono::milliseconds(10);
  options.sweeper_thread = false;
  constexpr int pauses = 16;
  constexpr auto short_pause = std::chrono::milliseconds(40);
  constexpr auto long_pause = std::chrono::milliseconds(160);
  int short_pauses = 0;
  int lost = 0;
  for (int attempt = 0; attempt < 3; ++attempt) {
    size_class_resource pool(options);
    std::vector<std::chrono::steady_clock::duration> paused;
    std::vector<bool> kept;  // after each pause: whether the worker still had its cache
    std::atomic<bool> done{false};
    std::thread worker([&] {
      for (int i = 0; i < pauses; ++i) {
        burst_of_4k_blocks(pool);
        const auto start = std::chrono::steady_clock::now();
        std::this_thread::sleep_for(std::chrono::milliseconds(25));
        paused.push_back(std::chrono::steady_clock::now() - start);
        kept.push_back(pool.stats().thread_cached_bytes.size() == 2);
      }
      done.store(true);
    });
    while (!done.load()) burst_of_4k_blocks(pool);
    worker.join();
    short_pauses = 0;
    lost = 0;
    bool overslept = false;
    for (int i = 0; i < pauses; ++i) {
      overslept = overslept || paused[i] >= long_pause;
      if (paused[i] >= short_pause) continue;  // more than three sweeps: not counted
      ++short_pauses;
      if (!kept[i]) ++lost;
    }
    if (short_pauses >= pauses / 2 && !overslept) break;
  }
  INFO(short_pauses << " pauses under 40 ms, the cache lost in " << lost);
  REQUIRE(short_pauses >= pauses / 2);
  CHECK(lost <= 2);
}

TEST_CASE("size_class: threads that worked and exited leave idle_retained behind",
          "[size_class][threads]") {
  // The exiting threads' caches come back with them; the sweeper then finds no cache out, and
  // stopped ticking even when a sweep the threads claimed just before exiting had kept it from
  // its own turn: max_retained (16 MiB) stayed, for good. Trials, as the exits race the sweeps.
  for (int trial = 0; trial < 12; ++trial) {
    CAPTURE(trial);
    size_class_options options;
    pmrkit::counting_resource upstream(std::pmr::new_delete_resource());
    size_class_resource pool(options, &upstream);
    const auto work = [&] {
      for (int burst = 0; burst < 10; ++burst) {
        std::vector<void*> blocks;
        for (int i = 0; i < 6000; ++i) blocks.push_back(pool.allocate(1000 + (i % 7) * 300));
        for (std::size_t i = 0; i < blocks.size(); ++i)
          pool.deallocate(blocks[i], 1000 + (i % 7) * 300);
      }
    };
    std::thread a(work), b(work);
    a.join();
    b.join();
    // A second is a thousand cache_idle_times; the sweeper's turn comes every four.
    const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(1);
    while (pool.stats().empty_chunk_bytes > options.idle_retained &&
           std::chrono::steady_clock::now() < deadline)
      std::this_thread::sleep_for(std::chrono::milliseconds(1));
    CHECK(pool.stats().empty_chunk_bytes <= options.idle_retained);
  }
}

TEST_CASE("size_class: an idle resource keeps idle_retained of its empty chunks",
          "[size_class][threads]") {
  // A thread frees all it allocated and exits: 8 MiB of chunks empty, within max_retained
  // (16 MiB), kept for the next burst. Two threads then share the pool (which starts the
  // sweeper), free all they allocated and park. A sweep takes both caches, so the resource is
  // idle, and the empty chunks beyond idle_retained go back. Without the sweeper thread no
  // sweep runs once both park (sweeps otherwise ride on slow paths), and all stay: 100 ms, 100
  // cache_idle_times, only ends that wait.
  const bool sweeper = GENERATE(true, false);
  CAPTURE(sweeper);
  size_class_options options;
  options.sweeper_thread = sweeper;
  pmrkit::counting_resource upstream(std::pmr::new_delete_resource());
  size_class_resource pool(options, &upstream);
  const auto burst = [&](std::size_t bytes) {
    std::vector<void*> blocks;
    for (std::size_t done = 0; done < bytes; done += 256) blocks.push_back(pool.allocate(256));
    for (void* p : blocks) pool.deallocate(p, 256);
  };
  std::thread([&] { burst(8 * mib); }).join();
  // The thread's cache came back as it exited; no sweep has run (one thread at a time).
  const std::uint64_t kept = pool.stats().empty_chunk_bytes;
  REQUIRE(kept > options.idle_retained + 2 * mib);
  REQUIRE(kept <= options.max_retained);

  std::barrier parked(3);
  std::vector<std::thread> workers;
  for (int w = 0; w < 2; ++w) {
    workers.emplace_back([&] {
      burst(4 * mib);
      parked.arrive_and_wait();  // burst done
      parked.arrive_and_wait();  // may exit
    });
  }
  parked.arrive_and_wait();
  // This thread only reads stats(): it has no cache of the pool.
  const auto wait = sweeper ? std::chrono::milliseconds(20'000) : std::chrono::milliseconds(100);
  const auto deadline = std::chrono::steady_clock::now() + wait;
  size_class_stats now;
  do {
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
    now = pool.stats();
  } while ((now.empty_chunk_bytes > options.idle_retained || !now.thread_cached_bytes.empty()) &&
           std::chrono::steady_clock::now() < deadline);
  const std::uint64_t held = upstream.stats().bytes_in_use;
  parked.arrive_and_wait();
  for (std::thread& w : workers) w.join();
  INFO("empty chunks " << now.empty_chunk_bytes << ", held " << held << ", caches "
                       << now.thread_cached_bytes.size());
  if (sweeper) {
    CHECK(now.thread_cached_bytes.empty());
    CHECK(now.empty_chunk_bytes <= options.idle_retained);
    CHECK(held <= options.idle_retained);
  } else {
    // The worker that parked last keeps its cache: no slow path sweeps after it. (The other's
    // may have been taken by its slow paths, on a slow machine.) So the resource is never idle.
    CHECK(!now.thread_cached_bytes.empty());
    CHECK(now.empty_chunk_bytes > options.idle_retained + 2 * mib);
  }
}
