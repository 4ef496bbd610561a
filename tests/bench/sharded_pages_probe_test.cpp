// bench/sharded_pages_probe: the design probe, in every geometry, hands out distinct, aligned,
// writable blocks of every pooled size, reuses what comes back (an emptied page's slices
// included, for pages of another size), routes the rest to upstream, and returns every segment
// when destroyed, so the figures measured with it are of a correct pool.
#include "sharded_pages_probe.hpp"

#include <algorithm>
#include <array>
#include <atomic>
#include <catch2/catch.hpp>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <functional>
#include <memory_resource>
#include <mutex>
#include <random>
#include <set>
#include <thread>
#include <tuple>
#include <utility>
#include <vector>

#include "pmrkit/counting_resource.hpp"

using pmrkit::counting_resource;
using pmrkit::bench::sharded_pages_probe;
using pmrkit::bench::sharded_pages_probe_1m;
using pmrkit::bench::sharded_pages_probe_grow;
using pmrkit::bench::sharded_pages_probe_chunks;
using pmrkit::bench::sharded_pages_probe_owned;
using pmrkit::bench::sharded_pages_probe_owned_chunks;
using pmrkit::bench::sharded_pages_probe_owned_lean;
using pmrkit::bench::sharded_pages_probe_owned_spans;

namespace {

// The geometries each test runs on: all of them; those whose pages are cut from segments; those
// whose pages belong to threads.
using every_geometry =
    std::tuple<sharded_pages_probe, sharded_pages_probe_1m, sharded_pages_probe_grow,
               sharded_pages_probe_owned, sharded_pages_probe_chunks,
               sharded_pages_probe_owned_chunks, sharded_pages_probe_owned_lean,
               sharded_pages_probe_owned_spans>;
using segment_geometries =
    std::tuple<sharded_pages_probe, sharded_pages_probe_1m, sharded_pages_probe_grow,
               sharded_pages_probe_owned, sharded_pages_probe_owned_lean>;
using owned_geometries =
    std::tuple<sharded_pages_probe_owned, sharded_pages_probe_owned_chunks,
               sharded_pages_probe_owned_lean, sharded_pages_probe_owned_spans>;

struct live_block {
  unsigned char* address;
  std::size_t bytes;
  unsigned char fill;
};

// Every byte of every live block still holds its own fill: no two blocks overlap, and no
// block's bytes were taken by the probe's bookkeeping.
bool intact(const live_block& b) {
  for (std::size_t i = 0; i < b.bytes; ++i)
    if (b.address[i] != b.fill) return false;
  return true;
}
bool intact(const std::vector<live_block>& live) {
  for (const live_block& b : live)
    if (!intact(b)) return false;
  return true;
}

// A block of `bytes` from `r`, filled with `fill`, which moves on to the next value.
live_block allocate_filled(std::pmr::memory_resource& r, std::size_t bytes, std::size_t alignment,
                           unsigned char& fill) {
  auto* const p = static_cast<unsigned char*>(r.allocate(bytes, alignment));
  std::memset(p, fill, bytes);
  const live_block b{p, bytes, fill};
  fill = static_cast<unsigned char>(fill % 251 + 1);
  return b;
}

// The first block of each page of page_bytes (aligned to its size) among `blocks`, and the
// others: freeing only the others leaves every page with a block out, so none empties.
std::pair<std::vector<void*>, std::vector<void*>> one_block_a_page(
    const std::vector<void*>& blocks, std::uintptr_t page_bytes) {
  std::pair<std::vector<void*>, std::vector<void*>> kept_and_freed;
  std::set<std::uintptr_t> pages;
  for (void* block : blocks)
    (pages.insert(reinterpret_cast<std::uintptr_t>(block) & ~(page_bytes - 1)).second
         ? kept_and_freed.first
         : kept_and_freed.second)
        .push_back(block);
  return kept_and_freed;
}

// Runs a step of a test on this thread, or on a new one that it joins.
using on_thread = void (*)(const std::function<void()>& step);
void on_this_thread(const std::function<void()>& step) { step(); }
void on_new_thread(const std::function<void()>& step) { std::thread(step).join(); }

// Three pages' worth of 64-byte blocks (pages of 128 blocks, 8 KiB aligned to their size; a
// chunk gives two to its descriptor) allocated by one step, all but one block of each page freed
// by the next, then twice as many allocated by the last: every freed block comes back among
// them. The kept block keeps each page from emptying and going back to be formatted anew (in
// spans, empty chunks of a span in use come before kept ones), so each page rejoins its class's
// queue, whose blocks come before new pages (the last page's never-used blocks may come first).
template <class Probe>
void check_freed_blocks_come_back(Probe& probe, on_thread allocate_on, on_thread free_on,
                                  on_thread allocate_again_on) {
  constexpr std::size_t bytes = 64;
  constexpr std::size_t count = 3 * 128;
  constexpr std::uintptr_t page_bytes = 128 * bytes;
  std::vector<void*> blocks;
  allocate_on([&] {
    for (std::size_t i = 0; i < count; ++i) blocks.push_back(probe.allocate(bytes, 8));
  });
  std::vector<void*> kept, freed;
  std::tie(kept, freed) = one_block_a_page(blocks, page_bytes);
  REQUIRE(kept.size() >= 3);  // pages
  free_on([&] {
    for (void* block : freed) probe.deallocate(block, bytes, 8);
  });
  std::vector<void*> again;
  allocate_again_on([&] {
    for (std::size_t i = 0; i < 2 * count; ++i) again.push_back(probe.allocate(bytes, 8));
  });
  std::sort(freed.begin(), freed.end());
  std::sort(again.begin(), again.end());
  CHECK(std::includes(again.begin(), again.end(), freed.begin(), freed.end()));
  for (void* block : again) probe.deallocate(block, bytes, 8);
  for (void* block : kept) probe.deallocate(block, bytes, 8);
}

}  // namespace

TEMPLATE_LIST_TEST_CASE(
    "sharded_pages_probe: blocks of every pooled size are aligned and apart",
    "[bench][probe]", every_geometry) {
  counting_resource upstream(std::pmr::new_delete_resource());
  {
    TestType probe(&upstream);
    std::vector<live_block> live;
    unsigned char fill = 1;
    for (std::size_t bytes = 1; bytes <= TestType::largest_pooled; bytes += 37) {
      for (int copies = 0; copies < 3; ++copies) {
        live.push_back(allocate_filled(probe, bytes, bytes >= 16 ? 16 : 8, fill));
        REQUIRE(reinterpret_cast<std::uintptr_t>(live.back().address) % 16 == 0);
      }
    }
    CHECK(intact(live));
    for (const live_block& b : live) probe.deallocate(b.address, b.bytes, b.bytes >= 16 ? 16 : 8);
  }
  CHECK(upstream.stats().bytes_in_use == 0);
}

TEMPLATE_LIST_TEST_CASE(
    "sharded_pages_probe: freed blocks are reused, not taken anew from upstream",
    "[bench][probe]", every_geometry) {
  counting_resource upstream(std::pmr::new_delete_resource());
  TestType probe(&upstream);
  std::vector<void*> blocks;
  for (int round = 0; round < 3; ++round) {
    for (int i = 0; i < 20'000; ++i) blocks.push_back(probe.allocate(16 + (i % 7) * 40, 8));
    for (std::size_t i = 0; i < blocks.size(); ++i)
      probe.deallocate(blocks[i], 16 + (i % 7) * 40, 8);
    blocks.clear();
  }
  const auto after_three = upstream.stats().bytes_allocated;
  for (int i = 0; i < 20'000; ++i) blocks.push_back(probe.allocate(16 + (i % 7) * 40, 8));
  CHECK(upstream.stats().bytes_allocated == after_three);
  for (std::size_t i = 0; i < blocks.size(); ++i)
    probe.deallocate(blocks[i], 16 + (i % 7) * 40, 8);
}

TEMPLATE_LIST_TEST_CASE(
    "sharded_pages_probe: an emptied page's slices serve a page of another size",
    "[bench][probe]", segment_geometries) {
  counting_resource upstream(std::pmr::new_delete_resource());
  TestType probe(&upstream);
  // 16-byte blocks, pages of one slice, until they fill the first segment and a second comes.
  std::vector<void*> small;
  while (upstream.stats().allocations < 2) small.push_back(probe.allocate(16, 8));
  // The block that took the second segment stays; every page of the first empties.
  small.pop_back();
  for (void* p : small) probe.deallocate(p, 16, 8);
  // Blocks of 1 KiB take pages of 16 or 32 slices: from the first segment's free slices.
  const auto segments = upstream.stats().allocations;
  std::vector<void*> large;
  for (int i = 0; i < 128; ++i) large.push_back(probe.allocate(1024, 8));
  CHECK(upstream.stats().allocations == segments);
  for (void* p : large) probe.deallocate(p, 1024, 8);
}

TEMPLATE_LIST_TEST_CASE(
    "sharded_pages_probe: pages of every size come and go without overlapping",
    "[bench][probe]", every_geometry) {
  // Bursts of one class at a time, each freed but for a few blocks, so that pages of many sizes
  // empty, give their slices back and are cut again from the holes the survivors leave.
  counting_resource upstream(std::pmr::new_delete_resource());
  {
    TestType probe(&upstream);
    std::mt19937 random(7);
    std::uniform_int_distribution<std::size_t> size(1, TestType::largest_pooled);
    std::vector<live_block> live;
    unsigned char fill = 1;
    for (int burst = 0; burst < 300; ++burst) {
      const std::size_t bytes = size(random);
      std::vector<live_block> fresh;
      const int count = static_cast<int>(256 * 1024 / bytes) + 1;
      for (int i = 0; i < count; ++i) fresh.push_back(allocate_filled(probe, bytes, 8, fill));
      for (const live_block& b : fresh) {
        if (random() % 16 == 0) {
          live.push_back(b);
        } else {
          REQUIRE(intact(b));
          probe.deallocate(b.address, b.bytes, 8);
        }
      }
    }
    CHECK(intact(live));
    for (const live_block& b : live) probe.deallocate(b.address, b.bytes, 8);
  }
  CHECK(upstream.stats().bytes_in_use == 0);
}

TEMPLATE_LIST_TEST_CASE(
    "sharded_pages_probe: large or over-aligned requests go to upstream and back",
    "[bench][probe]", every_geometry) {
  counting_resource upstream(std::pmr::new_delete_resource());
  TestType probe(&upstream);
  void* large = probe.allocate(TestType::largest_pooled + 1, 8);
  CHECK(upstream.stats().bytes_in_use == TestType::largest_pooled + 1);
  void* aligned = probe.allocate(64, 64);
  CHECK(reinterpret_cast<std::uintptr_t>(aligned) % 64 == 0);
  CHECK(upstream.stats().allocations == 2);
  probe.deallocate(aligned, 64, 64);
  probe.deallocate(large, TestType::largest_pooled + 1, 8);
  CHECK(upstream.stats().bytes_in_use == 0);
}

TEMPLATE_LIST_TEST_CASE(
    "sharded_pages_probe: a random live set keeps its contents, returns everything",
    "[bench][probe]", every_geometry) {
  counting_resource upstream(std::pmr::new_delete_resource());
  {
    TestType probe(&upstream);
    std::mt19937 random(12);
    std::uniform_int_distribution<std::size_t> size(1, 4096);
    std::vector<live_block> live;
    unsigned char fill = 1;
    for (int step = 0; step < 200'000; ++step) {
      if (live.size() < 2'000 && (live.empty() || random() % 2 == 0)) {
        live.push_back(allocate_filled(probe, size(random), 8, fill));
      } else {
        const std::size_t victim = random() % live.size();
        std::swap(live[victim], live.back());
        const live_block b = live.back();
        live.pop_back();
        REQUIRE(intact(b));
        probe.deallocate(b.address, b.bytes, 8);
      }
    }
    CHECK(intact(live));
    // Left live on purpose: destruction returns every segment whatever is still allocated.
  }
  CHECK(upstream.stats().bytes_in_use == 0);
}

TEMPLATE_LIST_TEST_CASE(
    "sharded_pages_probe_owned: each thread allocates from pages of its own",
    "[bench][probe]", owned_geometries) {
  counting_resource upstream(std::pmr::new_delete_resource());
  TestType probe(&upstream);
  // The unowned geometries would hand the second thread the block right after the first (one
  // page per class); owned pages give it a page of its own, past the first thread's.
  constexpr std::size_t bytes = 64;
  constexpr std::size_t page_bytes = 128 * bytes;
  void* const first = probe.allocate(bytes, 8);
  void* const second = probe.allocate(bytes, 8);
  CHECK(static_cast<std::byte*>(second) - static_cast<std::byte*>(first) == bytes);
  std::uintptr_t other = 0;
  std::thread([&] {
    void* const block = probe.allocate(bytes, 8);
    other = reinterpret_cast<std::uintptr_t>(block);
    probe.deallocate(block, bytes, 8);  // on its own thread: the probe has no cross-thread path
  }).join();
  const auto mine = reinterpret_cast<std::uintptr_t>(first);
  CHECK((other >= mine + page_bytes || other + page_bytes <= mine));
  probe.deallocate(second, bytes, 8);
  probe.deallocate(first, bytes, 8);
}

TEMPLATE_LIST_TEST_CASE(
    "sharded_pages_probe_owned: blocks freed on another thread go back to their pages",
    "[bench][probe]", owned_geometries) {
  counting_resource upstream(std::pmr::new_delete_resource());
  TestType probe(&upstream);
  // The pages before the last are full, so their blocks come back through the returned list,
  // the last one's through its own list.
  check_freed_blocks_come_back(probe, on_this_thread, on_new_thread, on_this_thread);
}

TEMPLATE_LIST_TEST_CASE(
    "sharded_pages_probe_owned: two threads freeing each other's blocks keep them intact and "
    "reuse them",
    "[bench][probe]", owned_geometries) {
  counting_resource upstream(std::pmr::new_delete_resource());
  TestType probe(&upstream);
  // Each thread allocates filled blocks of random sizes and hands them to the other, which
  // checks and frees them: every block goes back on a thread other than its page's. About
  // 60 MB pass through; a probe that never reused what the other thread freed would take
  // that much from upstream.
  struct mailbox {
    std::mutex mutex;
    std::vector<live_block> blocks;
  };
  std::array<mailbox, 2> boxes;
  constexpr int steps = 30'000;
  constexpr std::size_t most_waiting = 256;
  std::array<bool, 2> intact_all{true, true};
  const auto worker = [&](int self) {
    std::mt19937 random(static_cast<unsigned>(self) + 1);
    std::uniform_int_distribution<std::size_t> size(1, 4096);
    unsigned char fill = static_cast<unsigned char>(self * 100 + 1);
    std::vector<live_block> received;
    for (int step = 0; step < steps; ++step) {
      const live_block b = allocate_filled(probe, size(random), 8, fill);
      {
        const std::lock_guard lock(boxes[self].mutex);
        if (boxes[self].blocks.size() < most_waiting) {
          boxes[self].blocks.push_back(b);
        } else {
          probe.deallocate(b.address, b.bytes, 8);
        }
      }
      {
        const std::lock_guard lock(boxes[1 - self].mutex);
        received.swap(boxes[1 - self].blocks);
      }
      for (const live_block& r : received) {
        if (!intact(r)) intact_all[self] = false;
        probe.deallocate(r.address, r.bytes, 8);
      }
      received.clear();
    }
  };
  std::thread first(worker, 0);
  std::thread second(worker, 1);
  first.join();
  second.join();
  CHECK(intact_all[0]);
  CHECK(intact_all[1]);
  for (mailbox& box : boxes)
    for (const live_block& b : box.blocks) {
      CHECK(intact(b));
      probe.deallocate(b.address, b.bytes, 8);
    }
  // A few MiB at most: the live set never exceeds 512 blocks of 4 KiB (2 MiB).
  CHECK(upstream.stats().peak_bytes_in_use <= std::size_t{8} << 20);
}

TEMPLATE_LIST_TEST_CASE(
    "sharded_pages_probe_owned: a thread's pages outlive it, and the next thread adopts them",
    "[bench][probe]", owned_geometries) {
  counting_resource upstream(std::pmr::new_delete_resource());
  TestType probe(&upstream);
  // A thread allocates and exits with every block live; this thread frees into its abandoned
  // heap (each free takes the path of a free from another thread); a later thread adopts the
  // heap and collects them. A heap that died with its thread would strand them.
  check_freed_blocks_come_back(probe, on_new_thread, on_this_thread, on_new_thread);
}

TEMPLATE_LIST_TEST_CASE(
    "sharded_pages_probe_owned: a thread exits while another frees into its full pages",
    "[bench][probe]", owned_geometries) {
  counting_resource upstream(std::pmr::new_delete_resource());
  TestType probe(&upstream);
  // Each round a thread fills sixteen pages of 64-byte blocks and exits while another frees those
  // blocks, every 128th first (about one a page): the frees that take a full page's mark race with
  // the exit taking the marks back, and the exit must wait for those that won, or they would link
  // their pages into a heap that is gone (or into the abandoned one, whose queue holds them
  // already). Every block comes back to the next round's threads, so memory held stays that of a
  // round or two.
  constexpr int rounds = 100;
  constexpr int blocks_per_round = 16 * 128;
  bool intact_all = true;
  for (int round = 0; round < rounds; ++round) {
    std::vector<live_block> blocks;
    std::atomic<bool> ready{false};
    std::thread freer([&] {
      while (!ready.load(std::memory_order_acquire)) std::this_thread::yield();
      for (int first = 0; first < 128; ++first)
        for (std::size_t i = static_cast<std::size_t>(first); i < blocks.size(); i += 128) {
          if (!intact(blocks[i])) intact_all = false;
          probe.deallocate(blocks[i].address, blocks[i].bytes, 8);
        }
    });
    std::thread([&] {
      unsigned char fill = static_cast<unsigned char>(round % 200 + 1);
      for (int i = 0; i < blocks_per_round; ++i)
        blocks.push_back(allocate_filled(probe, 64, 8, fill));
      ready.store(true, std::memory_order_release);
    }).join();
    freer.join();
  }
  CHECK(intact_all);
  // A round allocates 128 KiB; a hundred rounds that never reused a dead thread's pages would
  // hold 12.8 MB.
  CHECK(upstream.stats().peak_bytes_in_use <= std::size_t{3} << 20);
}

TEMPLATE_LIST_TEST_CASE(
    "sharded_pages_probe_owned: threads that come and go, each freeing its predecessors' "
    "blocks, keep them intact and memory held bounded",
    "[bench][probe]", owned_geometries) {
  counting_resource upstream(std::pmr::new_delete_resource());
  TestType probe(&upstream);
  // Generations of two threads at once. Each thread frees the blocks one thread of the
  // previous generation left live (their heaps abandoned, or adopted by now: frees from
  // another thread either way), then allocates 2,000 filled blocks of random sizes, frees half
  // and leaves half live for the next generation. About 4 MB is live at a time; twenty
  // generations allocate about 80 MB, which a probe that stranded exited threads' pages would
  // hold.
  constexpr int generations = 20;
  constexpr int blocks_per_thread = 2'000;
  std::array<std::vector<live_block>, 2> left{};
  std::array<bool, 2> intact_all{true, true};
  for (int g = 0; g < generations; ++g) {
    std::array<std::vector<live_block>, 2> next{};
    const auto worker = [&](int self) {
      for (const live_block& b : left[1 - self]) {
        if (!intact(b)) intact_all[self] = false;
        probe.deallocate(b.address, b.bytes, 8);
      }
      std::mt19937 random(static_cast<unsigned>(g * 2 + self + 1));
      std::uniform_int_distribution<std::size_t> size(1, 4096);
      unsigned char fill = static_cast<unsigned char>(self * 100 + 1);
      for (int i = 0; i < blocks_per_thread; ++i) {
        const live_block b = allocate_filled(probe, size(random), 8, fill);
        if (i % 2 == 0)
          next[self].push_back(b);
        else
          probe.deallocate(b.address, b.bytes, 8);
      }
    };
    std::thread first(worker, 0);
    std::thread second(worker, 1);
    first.join();
    second.join();
    left = std::move(next);
  }
  CHECK(intact_all[0]);
  CHECK(intact_all[1]);
  for (const std::vector<live_block>& blocks : left)
    for (const live_block& b : blocks) {
      CHECK(intact(b));
      probe.deallocate(b.address, b.bytes, 8);
    }
  // Two generations live at most (the one freeing, the one allocating): about 8 MB.
  CHECK(upstream.stats().peak_bytes_in_use <= std::size_t{24} << 20);
}

TEST_CASE("sharded_pages_probe_chunks: an emptied current page goes before memory held rises",
          "[bench][probe]") {
  counting_resource upstream(std::pmr::new_delete_resource());
  sharded_pages_probe_chunks probe(&upstream);
  // One 10 KiB block, freed: its class's page (a 64 KiB chunk) empties but stays current.
  probe.deallocate(probe.allocate(10'000, 8), 10'000, 8);
  CHECK(upstream.stats().bytes_in_use == 64 * 1024);
  // Another class's first page would take the most held to 72 KiB: the empty page goes back
  // to upstream first (kept, it could serve no page of 8 KiB), and 8 KiB are held.
  void* const small = probe.allocate(64, 8);
  CHECK(upstream.stats().bytes_in_use == 8 * 1024);
  CHECK(upstream.stats().peak_bytes_in_use == 64 * 1024);
  probe.deallocate(small, 64, 8);
}
