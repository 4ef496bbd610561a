// The object a threaded row's threads share (bench/shared_by_threads.hpp): made once, the same
// for every thread, finished once by the last thread out, and destroyed when no thread of the
// run can still be using it.
#include "shared_by_threads.hpp"

#include <atomic>
#include <catch2/catch.hpp>
#include <memory>
#include <thread>
#include <vector>

namespace {

using pmrkit::bench::shared_by_threads;
using pmrkit::bench::shared_thread_counts;

struct tracked {
  static inline std::atomic<int> alive{0};
  int id;
  explicit tracked(int i) : id(i) { ++alive; }
  ~tracked() { --alive; }
  tracked(const tracked&) = delete;
  tracked& operator=(const tracked&) = delete;
};

// One run of `threads` threads: each joins, records the object it got, and leaves; returns
// the objects seen and how often make and finish ran.
struct run_result {
  std::vector<const tracked*> seen;
  int made = 0;
  int finished = 0;
  bool thread0_saw_finish = false;
};

run_result run(shared_by_threads<tracked>& shared, int threads, int id) {
  run_result result;
  result.seen.resize(static_cast<std::size_t>(threads));
  std::atomic<int> made{0};
  std::atomic<int> finished{0};
  const auto body = [&](int me) {
    tracked& object = shared.join(me, [&] {
      ++made;
      return std::make_unique<tracked>(id);
    });
    result.seen[static_cast<std::size_t>(me)] = &object;
    shared.leave(me, threads, [&](tracked& t) {
      CHECK(t.id == id);
      ++finished;
    });
    if (me == 0) result.thread0_saw_finish = finished.load() == 1;
  };
  std::vector<std::thread> others;
  for (int me = 1; me < threads; ++me) others.emplace_back(body, me);
  body(0);
  for (auto& t : others) t.join();
  result.made = made.load();
  result.finished = finished.load();
  return result;
}

}  // namespace

TEST_CASE("shared_by_threads: every thread of a run gets the one object thread 0 made") {
  shared_by_threads<tracked> shared;
  for (const int threads : {2, 4}) {
    const run_result r = run(shared, threads, threads);
    CHECK(r.made == 1);
    CHECK(r.finished == 1);
    CHECK(r.thread0_saw_finish);  // thread 0 leaves after the last thread finished the object
    for (const tracked* seen : r.seen) CHECK(seen == r.seen[0]);
    // Kept after a run of several threads: one of them may still be exiting.
    CHECK(tracked::alive == 1);
  }
  // The next run's thread 0 destroys it before making its own; a run of one destroys its own.
  const run_result alone = run(shared, 1, 7);
  CHECK(alone.made == 1);
  CHECK(alone.finished == 1);
  CHECK(tracked::alive == 0);
}

TEST_CASE("shared_by_threads: destroying it destroys what a run of several threads left") {
  {
    shared_by_threads<tracked> shared;
    run(shared, 3, 1);
    CHECK(tracked::alive == 1);
  }
  CHECK(tracked::alive == 0);
}

TEST_CASE("shared_thread_counts: doubling from 2 up to the hardware threads, 2 at least") {
  const std::vector<int> counts = shared_thread_counts();
  REQUIRE(!counts.empty());
  CHECK(counts.front() == 2);
  for (std::size_t i = 1; i < counts.size(); ++i) CHECK(counts[i] == 2 * counts[i - 1]);
  const auto cores = static_cast<int>(std::thread::hardware_concurrency());
  CHECK(counts.back() <= std::max(2, cores));
  CHECK(2 * counts.back() > std::max(2, cores));
}
