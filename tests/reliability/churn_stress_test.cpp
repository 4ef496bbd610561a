// A long multi-threaded churn in the spirit of mimalloc's test-stress, over size_class and
// buffer_pool at once. Worker threads live for a random number of steps and are replaced as
// they exit, so thread creation and teardown (and the caches they take and give back) overlap
// with other threads' work. Each step allocates a raw block from size_class or a buffer from
// one of two pools, writes a seeded pattern, grows buffers, frees, or swaps a block/buffer
// through shared transfer slots so that most frees and returns happen on another thread. Every
// block and buffer is checked before it is freed. Underneath sits a checked_resource (default
// on_error=abort), so any wrong free by size_class or buffer_pool to its upstream stops the
// test with a message. Fixed work by default; PMRKIT_LOAD_SECONDS=N runs for ~N seconds.
#include <algorithm>
#include <array>
#include <atomic>
#include <catch2/catch.hpp>
#include <cstdint>
#include <cstring>
#include <memory>
#include <mutex>
#include <optional>
#include <random>
#include <thread>
#include <vector>

#include "load_config.hpp"
#include "pmrkit/buffer_pool.hpp"
#include "pmrkit/checked_resource.hpp"
#include "pmrkit/counting_resource.hpp"
#include "pmrkit/size_class_resource.hpp"
#include "test_resources.hpp"

using pmrkit::buffer_pool;
using pmrkit::byte_buffer;
using pmrkit::test::check_pattern;
using pmrkit::test::fill_pattern;

namespace {

// Every raw block starts with what is needed to check and free it.
struct block_header {
  std::uint64_t seed;
  std::uint32_t bytes;
  std::uint32_t alignment;
};

// Only the first and last 512 bytes of a big block carry the pattern (where an overlapping
// neighbour would show), so the churn does not become a memset benchmark.
bool for_each_patterned(std::size_t bytes, auto&& visit) {
  constexpr std::size_t edge = 512;
  const std::size_t h = sizeof(block_header);
  if (bytes <= h + 2 * edge) return visit(h, bytes - h);
  return visit(h, edge) && visit(bytes - edge, edge);
}

// A buffer on its way between threads, with what it must contain.
struct parcel {
  byte_buffer buffer;
  std::uint64_t seed;
};

struct shared_state {
  std::pmr::memory_resource* blocks;  // size_class
  std::array<buffer_pool*, 2> pools;
  std::array<std::atomic<void*>, 128> block_slots{};
  std::array<std::atomic<parcel*>, 64> parcel_slots{};
  std::atomic<std::uint64_t> damaged{0};
  std::atomic<std::uint64_t> steps{0};
  std::atomic<std::uint64_t> cross_thread{0};
};

class worker {
 public:
  worker(shared_state& s, std::uint64_t seed) : s_(s), rng_(seed), next_seed_(seed << 24) {}
  ~worker() {
    for (void* p : blocks_) free_block(p);
    for (auto& p : parcels_) check_parcel(p);
  }

  void run(std::size_t steps) {
    for (std::size_t i = 0; i < steps; ++i) step();
    s_.steps.fetch_add(steps, std::memory_order_relaxed);
  }

 private:
  unsigned pick(unsigned below) {
    return std::uniform_int_distribution<unsigned>(0, below - 1)(rng_);
  }

  std::size_t random_size() {
    const unsigned roll = pick(1000);
    if (roll < 850) return sizeof(block_header) + pick(512);
    if (roll < 980) return sizeof(block_header) + pick(16 * 1024);
    if (roll < 997) return sizeof(block_header) + pick(64 * 1024);
    return 64 * 1024 + pick(512 * 1024);  // beyond size_class's max_pooled
  }

  void* make_block() {
    const std::size_t bytes = random_size();
    const std::size_t alignment = std::size_t{8} << pick(4);
    void* p = s_.blocks->allocate(bytes, alignment);
    const block_header h{++next_seed_, static_cast<std::uint32_t>(bytes),
                         static_cast<std::uint32_t>(alignment)};
    std::memcpy(p, &h, sizeof h);
    for_each_patterned(bytes, [&](std::size_t offset, std::size_t length) {
      fill_pattern(static_cast<std::byte*>(p) + offset, length, h.seed + offset);
      return true;
    });
    return p;
  }

  void free_block(void* p) {
    block_header h;
    std::memcpy(&h, p, sizeof h);
    const bool intact =
        reinterpret_cast<std::uintptr_t>(p) % h.alignment == 0 &&
        for_each_patterned(h.bytes, [&](std::size_t offset, std::size_t length) {
          return check_pattern(static_cast<std::byte*>(p) + offset, length, h.seed + offset);
        });
    if (!intact) {
      ++s_.damaged;  // not freed: its header cannot be trusted
      return;
    }
    s_.blocks->deallocate(p, h.bytes, h.alignment);
  }

  parcel make_parcel() {
    parcel p{s_.pools[pick(2)]->acquire(random_size()), ++next_seed_};
    const std::size_t first = pick(3000) + 1;
    p.buffer.resize_for_overwrite(first);
    fill_pattern(p.buffer.data(), first, p.seed);
    if (pick(4) == 0) {  // grow it, through its pool
      const std::size_t more = pick(20000) + 1;
      p.buffer.resize_for_overwrite(first + more);
      fill_pattern(p.buffer.data() + first, more, p.seed + 1);
      p.seed = p.seed | (std::uint64_t{first} << 40);  // remember where the second part starts
    }
    return p;
  }

  void check_parcel(parcel& p) {
    const std::size_t split = static_cast<std::size_t>(p.seed >> 40);
    const std::uint64_t seed = p.seed & ((std::uint64_t{1} << 40) - 1);
    bool intact;
    if (split == 0) {
      intact = check_pattern(p.buffer.data(), p.buffer.size(), seed);
    } else {
      intact = check_pattern(p.buffer.data(), split, seed) &&
               check_pattern(p.buffer.data() + split, p.buffer.size() - split, seed + 1);
    }
    if (!intact) ++s_.damaged;
    p.buffer.reset();  // back to its pool, from whichever thread holds it now
  }

  void step() {
    const unsigned roll = pick(100);
    if (roll < 30) {
      blocks_.push_back(make_block());
      if (blocks_.size() > 400) drop_block(pick(static_cast<unsigned>(blocks_.size())));
    } else if (roll < 45 && !blocks_.empty()) {
      drop_block(pick(static_cast<unsigned>(blocks_.size())));
    } else if (roll < 60 && !blocks_.empty()) {
      const unsigned at = pick(static_cast<unsigned>(blocks_.size()));
      void* theirs = s_.block_slots[pick(s_.block_slots.size())].exchange(blocks_[at]);
      if (theirs) {
        s_.cross_thread.fetch_add(1, std::memory_order_relaxed);
        blocks_[at] = theirs;
      } else {
        blocks_[at] = blocks_.back();
        blocks_.pop_back();
      }
    } else if (roll < 80) {
      parcels_.push_back(make_parcel());
      if (parcels_.size() > 40) drop_parcel(pick(static_cast<unsigned>(parcels_.size())));
    } else if (roll < 88 && !parcels_.empty()) {
      drop_parcel(pick(static_cast<unsigned>(parcels_.size())));
    } else if (!parcels_.empty()) {
      const unsigned at = pick(static_cast<unsigned>(parcels_.size()));
      auto* mine = new parcel(std::move(parcels_[at]));
      parcels_[at] = std::move(parcels_.back());
      parcels_.pop_back();
      if (parcel* theirs = s_.parcel_slots[pick(s_.parcel_slots.size())].exchange(mine)) {
        s_.cross_thread.fetch_add(1, std::memory_order_relaxed);
        parcels_.push_back(std::move(*theirs));
        delete theirs;
      }
    }
  }

  void drop_block(unsigned at) {
    free_block(blocks_[at]);
    blocks_[at] = blocks_.back();
    blocks_.pop_back();
  }
  void drop_parcel(unsigned at) {
    check_parcel(parcels_[at]);
    parcels_[at] = std::move(parcels_.back());
    parcels_.pop_back();
  }

  shared_state& s_;
  std::mt19937_64 rng_;
  std::uint64_t next_seed_;
  std::vector<void*> blocks_;
  std::vector<parcel> parcels_;
};

}  // namespace

TEST_CASE("churn: size_class and buffer_pool under threads that come and go",
          "[stress][concurrent]") {
  pmrkit::counting_resource os(std::pmr::new_delete_resource());
  std::optional<pmrkit::checked_resource> checked;
  pmrkit::checked_options checking;
  checking.quarantine_blocks = 64;  // abort on any violation: the default
  checked.emplace(checking, &os);
  std::uint64_t steps = 0;
  std::uint64_t threads_run = 0;
  std::uint64_t cross_thread = 0;
  {
    pmrkit::size_class_options o;
    o.max_retained = 512 * 1024;  // small, so chunks go back to upstream and come again
    o.thread_cache = 32 * 1024;
    pmrkit::size_class_resource blocks(o, &*checked);
    pmrkit::buffer_pool_options po;
    po.max_per_bucket = 8;
    po.thread_buffers_per_bucket = 2;
    buffer_pool on_size_class(&blocks, po);
    buffer_pool on_checked(&*checked, po);
    shared_state s;
    s.blocks = &blocks;
    s.pools = {&on_size_class, &on_checked};

    constexpr int slots = 4;
    std::array<std::thread, slots> running;
    std::array<std::atomic<bool>, slots> done{};
    pmrkit::test::load_budget budget(120);  // 120 thread lifetimes by default
    std::mt19937_64 rng(2024);
    const auto launch = [&](int slot) {
      const std::size_t lifetime = 1000 + rng() % 6000;
      const std::uint64_t seed = ++threads_run;
      done[static_cast<std::size_t>(slot)] = false;
      running[static_cast<std::size_t>(slot)] = std::thread([&, slot, lifetime, seed] {
        {
          worker w(s, seed);
          w.run(lifetime);
        }
        done[static_cast<std::size_t>(slot)] = true;
      });
    };
    for (int i = 0; i < slots; ++i) launch(i);
    bool more = true;
    while (more) {
      for (int i = 0; i < slots && more; ++i) {
        if (!done[static_cast<std::size_t>(i)]) continue;
        running[static_cast<std::size_t>(i)].join();
        more = budget.another();
        if (more) launch(i);
      }
      std::this_thread::yield();
    }
    for (auto& t : running)
      if (t.joinable()) t.join();

    // Whatever is left in the transfer slots: check and free it on this thread.
    {
      worker drain(s, 0);
      for (auto& slot : s.block_slots)
        if (void* p = slot.exchange(nullptr)) {
          block_header h;
          std::memcpy(&h, p, sizeof h);
          CHECK(check_pattern(static_cast<std::byte*>(p) + sizeof h,
                              std::min<std::size_t>(h.bytes - sizeof h, 512),
                              h.seed + sizeof h));
          blocks.deallocate(p, h.bytes, h.alignment);
        }
      for (auto& slot : s.parcel_slots)
        if (parcel* p = slot.exchange(nullptr)) delete p;
    }
    CHECK(s.damaged.load() == 0);
    steps = s.steps.load();
    cross_thread = s.cross_thread.load();

    for (const buffer_pool* pool : {&on_size_class, &on_checked}) {
      const auto st = pool->stats();
      CHECK(st.acquires == st.hits + st.misses);
      CHECK(st.hits > 0);
    }
    // All raw blocks are freed: what size_class still has out is exactly the buffers that
    // pool retains.
    const auto sc = blocks.stats();
    std::uint64_t live = sc.large_live_blocks;
    for (const auto& c : sc.classes) live += c.live_blocks;
    CHECK(live == on_size_class.stats().buffers_retained);
  }
  // Pools and size_class are gone: every block they took from checked came back, correctly.
  const auto cs = checked->stats();
  CHECK(cs.blocks_in_use == 0);
  CHECK(cs.violations == 0);
  CHECK(cs.allocations > 100);
  REQUIRE_NOTHROW(checked->verify());
  checked.reset();
  CHECK(os.stats().bytes_in_use == 0);
  INFO("steps " << steps << ", threads " << threads_run << ", cross-thread hand-overs "
                << cross_thread);
  CHECK(steps > 0);
  CHECK(cross_thread > 0);
  WARN("churn: " << threads_run << " threads, " << steps << " steps, " << cross_thread
                 << " cross-thread hand-overs, " << cs.allocations
                 << " upstream allocations checked");
}
