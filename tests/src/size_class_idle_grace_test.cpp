// idle_grace (src/size_class_idle_grace.hpp): a thread whose cache a sweep took back and that
// makes one again soon after gets a cache that waits for twice as many idle sweeps, up to a
// bound; one that comes back late, or that no sweep took from, waits for one.
#include <catch2/catch.hpp>
#include <cstdint>

#include "size_class_idle_grace.hpp"

namespace {

using pmrkit::detail::idle_grace;

constexpr std::uint64_t period = 1'000'000;  // a cache_idle_time of 1 ms, in nanoseconds
const int threads[20] = {};                  // stand-ins for the threads' keys

}  // namespace

TEST_CASE("idle_grace: a cache made again soon waits twice as long, up to the bound",
          "[size_class][idle]") {
  idle_grace grace;
  const void* const thread = &threads[0];
  CHECK(grace.sweeps_for_new_cache(thread, 0, period) == 1);  // never taken
  std::uint8_t sweeps = 1;
  std::uint64_t now = 10 * period;
  for (const std::uint8_t expected : {2, 4, 8, 8, 8}) {
    grace.taken(thread, now, sweeps);
    now += period / 2;  // back half a period after the sweep
    sweeps = grace.sweeps_for_new_cache(thread, now, period);
    CHECK(sweeps == expected);
    now += 5 * period;
  }
  CHECK(idle_grace::most_sweeps == 8);
}

TEST_CASE("idle_grace: a thread back late, or asked about twice, starts again at one",
          "[size_class][idle]") {
  idle_grace grace;
  const void* const thread = &threads[0];
  grace.taken(thread, 0, 4);
  CHECK(grace.sweeps_for_new_cache(thread, idle_grace::remade_within * period, period) == 8);
  // The answer forgets the thread: its next cache, unless a sweep takes it, waits for one.
  CHECK(grace.sweeps_for_new_cache(thread, idle_grace::remade_within * period, period) == 1);
  grace.taken(thread, 0, 4);
  CHECK(grace.sweeps_for_new_cache(thread, idle_grace::remade_within * period + 1, period) == 1);
  // A clock that reads earlier than the sweep (another thread's reading) is not "soon".
  grace.taken(thread, 5 * period, 2);
  CHECK(grace.sweeps_for_new_cache(thread, 4 * period, period) == 1);
}

TEST_CASE("idle_grace: threads are told apart, and the oldest is forgotten past sixteen",
          "[size_class][idle]") {
  idle_grace grace;
  for (int i = 0; i < 17; ++i) grace.taken(&threads[i], 0, static_cast<std::uint8_t>(1 + i % 2));
  // The first went to make room for the seventeenth; the others each get their own doubling.
  CHECK(grace.sweeps_for_new_cache(&threads[0], period, period) == 1);
  CHECK(grace.sweeps_for_new_cache(&threads[1], period, period) == 4);
  CHECK(grace.sweeps_for_new_cache(&threads[2], period, period) == 2);
  CHECK(grace.sweeps_for_new_cache(&threads[16], period, period) == 2);
  CHECK(grace.sweeps_for_new_cache(&threads[17], period, period) == 1);  // never taken
  // A thread taken twice keeps one entry, the latest.
  grace.taken(&threads[3], 0, 1);
  grace.taken(&threads[3], 0, 4);
  CHECK(grace.sweeps_for_new_cache(&threads[3], period, period) == 8);
  CHECK(grace.sweeps_for_new_cache(&threads[3], period, period) == 1);
}
