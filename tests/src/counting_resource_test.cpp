#include <atomic>
#include <catch2/catch.hpp>
#include <thread>
#include <vector>

#include "pmrkit/counting_resource.hpp"
#include "pmrkit/testing/fault_injecting_resource.hpp"

TEST_CASE("counting_resource counts what passes through", "[counting]") {
  pmrkit::counting_resource counter(std::pmr::new_delete_resource());
  void* a = counter.allocate(100, 8);
  void* b = counter.allocate(50, 16);
  auto s = counter.stats();
  CHECK(s.allocations == 2);
  CHECK(s.bytes_in_use == 150);
  CHECK(s.peak_bytes_in_use == 150);
  CHECK(s.bytes_allocated == 150);
  counter.deallocate(a, 100, 8);
  s = counter.stats();
  CHECK(s.deallocations == 1);
  CHECK(s.bytes_in_use == 50);
  CHECK(s.peak_bytes_in_use == 150);
  CHECK(s.blocks_in_use() == 1);
  counter.reset_totals();
  s = counter.stats();
  CHECK(s.allocations == 1);
  CHECK(s.deallocations == 0);
  CHECK(s.peak_bytes_in_use == 50);
  counter.deallocate(b, 50, 16);
  CHECK(counter.stats().bytes_in_use == 0);
}

TEST_CASE("counting_resource and fault_injecting_resource refuse a null resource",
          "[counting]") {
  // They accepted it, and the first allocation crashed.
  CHECK_THROWS_WITH(pmrkit::counting_resource(nullptr), Catch::Contains("null resource"));
  CHECK_THROWS_WITH(pmrkit::testing::fault_injecting_resource(nullptr),
                    Catch::Contains("null upstream"));
}

TEST_CASE("counting_resource does not count a failed allocation", "[counting]") {
  std::pmr::monotonic_buffer_resource exhausted(std::pmr::null_memory_resource());
  pmrkit::counting_resource counter(&exhausted);
  CHECK_THROWS_AS(counter.allocate(10, 8), std::bad_alloc);
  CHECK(counter.stats().allocations == 0);
  CHECK(counter.stats().bytes_in_use == 0);
}

TEST_CASE("counting_resource is exact under concurrent use", "[counting][concurrent]") {
  pmrkit::counting_resource counter(std::pmr::new_delete_resource());
  std::vector<std::thread> threads;
  for (int t = 0; t < 4; ++t)
    threads.emplace_back([&] {
      for (int i = 0; i < 10000; ++i) counter.deallocate(counter.allocate(32, 8), 32, 8);
    });
  for (auto& t : threads) t.join();
  const auto s = counter.stats();
  CHECK(s.allocations == 40000);
  CHECK(s.deallocations == 40000);
  CHECK(s.bytes_in_use == 0);
  CHECK(s.bytes_allocated == 40000u * 32);
  CHECK(s.peak_bytes_in_use >= 32);
  CHECK(s.peak_bytes_in_use <= 4u * 32);
}

TEST_CASE("counting_resource: a snapshot never has more frees than allocations",
          "[counting][concurrent]") {
  pmrkit::counting_resource counter(std::pmr::new_delete_resource());
  std::atomic<bool> stop{false};
  std::thread worker([&] {
    while (!stop.load(std::memory_order_relaxed))
      counter.deallocate(counter.allocate(8, 8), 8, 8);
  });
  std::uint64_t wrapped = 0;
  for (int i = 0; i < 2'000'000; ++i) {
    const auto s = counter.stats();
    if (s.deallocations > s.allocations) ++wrapped;
  }
  stop = true;
  worker.join();
  CHECK(wrapped == 0);
}

TEST_CASE("counting_resource: reset_totals() loses no count of a concurrent allocate or free",
          "[counting][concurrent]") {
  pmrkit::counting_resource counter(std::pmr::new_delete_resource());
  constexpr int workers = 3;
  constexpr int rounds = 20000;
  constexpr std::size_t kept_per_worker = 5;  // still allocated when the workers finish
  std::atomic<int> running{workers};
  std::vector<std::vector<void*>> kept(workers);
  std::vector<std::thread> threads;
  for (int t = 0; t < workers; ++t)
    threads.emplace_back([&, t] {
      for (int i = 0; i < rounds; ++i) counter.deallocate(counter.allocate(48, 8), 48, 8);
      for (std::size_t i = 0; i < kept_per_worker; ++i) kept[t].push_back(counter.allocate(16, 8));
      running.fetch_sub(1);
    });
  std::uint64_t resets = 0;
  while (running.load() > 0) {
    counter.reset_totals();
    ++resets;
  }
  for (auto& t : threads) t.join();
  INFO(resets << " resets");

  const auto s = counter.stats();
  CHECK(s.blocks_in_use() == workers * kept_per_worker);
  CHECK(s.bytes_in_use == workers * kept_per_worker * 16);
  CHECK(s.deallocations <= s.allocations);
  CHECK(s.peak_bytes_in_use >= s.bytes_in_use);
  CHECK(s.bytes_allocated >= s.bytes_in_use);

  counter.reset_totals();
  const auto quiet = counter.stats();
  CHECK(quiet.allocations == workers * kept_per_worker);
  CHECK(quiet.deallocations == 0);
  CHECK(quiet.bytes_allocated == quiet.bytes_in_use);
  CHECK(quiet.peak_bytes_in_use == quiet.bytes_in_use);
  for (auto& blocks : kept)
    for (void* p : blocks) counter.deallocate(p, 16, 8);
  CHECK(counter.stats().blocks_in_use() == 0);
  CHECK(counter.stats().bytes_in_use == 0);
}
