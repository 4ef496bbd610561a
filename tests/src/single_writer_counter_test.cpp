#include <catch2/catch.hpp>
#include <atomic>
#include <cstdint>
#include <mutex>
#include <thread>
#include <type_traits>
#include <vector>

#include "pmrkit/single_writer_counter.hpp"

using pmrkit::single_writer_counter;

// size_class packs two of these into a 32-byte free list: no hidden state.
static_assert(sizeof(single_writer_counter<std::uint32_t>) == sizeof(std::uint32_t));
static_assert(sizeof(single_writer_counter<std::uint64_t>) == sizeof(std::uint64_t));
static_assert(!std::is_copy_constructible_v<single_writer_counter<>>);
static_assert(!std::is_copy_assignable_v<single_writer_counter<>>);

TEST_CASE("single_writer_counter adds, subtracts and sets", "[single_writer_counter]") {
  single_writer_counter<std::uint64_t> counter;
  CHECK(counter.get() == 0);
  CHECK(counter.add() == 1);
  CHECK(counter.add(41) == 42);
  CHECK(counter.get() == 42);
  counter.subtract();
  counter.subtract(11);
  CHECK(counter.get() == 30);
  counter.set(7);
  CHECK(counter.get() == 7);

  const single_writer_counter<std::size_t> started(100);
  CHECK(started.get() == 100);
}

TEST_CASE("single_writer_counter wraps like its unsigned integer", "[single_writer_counter]") {
  single_writer_counter<std::uint32_t> counter(0xffff'ffffu);
  CHECK(counter.add() == 0);
  counter.subtract();
  CHECK(counter.get() == 0xffff'ffffu);
}

TEST_CASE("single_writer_counter: readers see a growing count while its writer counts",
          "[single_writer_counter][concurrent]") {
  constexpr std::uint64_t additions = 200'000;
  single_writer_counter<std::uint64_t> counter;
  std::atomic<bool> writer_done{false};
  struct reader_view {
    std::uint64_t last_seen = 0;
    bool went_back = false;
  };
  std::vector<reader_view> views(2);
  std::vector<std::thread> readers;
  for (reader_view& view : views) {
    readers.emplace_back([&, seen = &view] {
      std::uint64_t previous = 0;
      bool done = false;
      while (!done) {
        done = writer_done.load(std::memory_order_acquire);
        const std::uint64_t now = counter.get();
        if (now < previous) seen->went_back = true;
        previous = now;
      }
      seen->last_seen = previous;
    });
  }
  std::thread writer([&] {
    for (std::uint64_t i = 0; i < additions; ++i) counter.add(1);
    writer_done.store(true, std::memory_order_release);
  });
  writer.join();
  for (auto& reader : readers) reader.join();
  CHECK(counter.get() == additions);
  for (const reader_view& view : views) {
    CHECK_FALSE(view.went_back);
    // Each reader's last read came after it saw the writer finish.
    CHECK(view.last_seen == additions);
  }
}

TEST_CASE("single_writer_counter: writers taking turns under one lock lose nothing",
          "[single_writer_counter][concurrent]") {
  constexpr std::uint64_t additions = 50'000;
  single_writer_counter<std::uint64_t> counter;
  std::mutex turn;
  std::vector<std::thread> writers;
  for (int w = 0; w < 3; ++w) {
    writers.emplace_back([&] {
      for (std::uint64_t i = 0; i < additions; ++i) {
        const std::lock_guard lock(turn);
        counter.add();
      }
    });
  }
  for (auto& writer : writers) writer.join();
  CHECK(counter.get() == 3 * additions);
}
