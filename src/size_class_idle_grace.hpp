// Internal: how many idle sweeps in a row take a thread's cache back (size_class_engine's
// sweeps for idle caches, issue 15).
//
// A sweep finds a cache idle when its thread neither allocated nor took a slow path since the
// last sweep, a cache_idle_time at least. That is a thread that parked, which the sweeps are
// for, and also one that reads for a millisecond between bursts: two threads each reading the
// map it built on one pooled resource lost their caches after every read, made them again for
// the destroy that followed, and destroyed at 1.21-1.33x mimalloc's time where they took
// 1.01-1.18x with the sweeps off (docs/size_class_containers.md, "Idle, or reading"). So the
// sweeps remember whose caches they took: a thread that makes a cache again soon after (within
// `remade_within` cache_idle_times) was not parked, and its new cache waits for twice as many
// idle sweeps as the one taken, up to `most_sweeps`. A thread that parks for good loses its
// cache after one sweep, or after at most most_sweeps once it has come back early before.
//
// Thread safety: none; the engine guards it with its reclaim mutex. It holds thread keys (the
// address of a thread's cache directory) only to compare them, and never reads through them.
#pragma once

#include <algorithm>
#include <array>
#include <cstdint>

namespace pmrkit::detail {

class idle_grace {
 public:
  static constexpr std::uint8_t most_sweeps = 8;
  static constexpr std::uint64_t remade_within = 16;  // cache_idle_times

  // A sweep at `now` took back the cache of `thread`, which had waited `sweeps` idle sweeps.
  // Remembers the last few threads; an older one is forgotten, and its next cache waits one.
  void taken(const void* thread, std::uint64_t now, std::uint8_t sweeps) noexcept {
    taken_cache* slot = find(thread);
    if (slot == nullptr) slot = &recent_[next_++ % recent_.size()];
    *slot = {thread, now, sweeps};
  }

  // The idle sweeps that the new cache of `thread`, made at `now`, waits for: twice its last
  // cache's if a sweep took that one within remade_within idle periods of `idle_period`
  // (nanoseconds) before now, else one. Forgets the thread either way.
  std::uint8_t sweeps_for_new_cache(const void* thread, std::uint64_t now,
                                    std::uint64_t idle_period) noexcept {
    taken_cache* const last = find(thread);
    if (last == nullptr) return 1;
    const taken_cache was = *last;
    *last = {};
    if (now < was.at || now - was.at > remade_within * idle_period) return 1;
    return static_cast<std::uint8_t>(
        std::min(2 * std::max<unsigned>(was.sweeps, 1), unsigned{most_sweeps}));
  }

 private:
  struct taken_cache {
    const void* thread = nullptr;
    std::uint64_t at = 0;
    std::uint8_t sweeps = 0;
  };

  taken_cache* find(const void* thread) noexcept {
    if (thread == nullptr) return nullptr;
    for (taken_cache& slot : recent_)
      if (slot.thread == thread) return &slot;
    return nullptr;
  }

  // As many as there are shards: a pool's threads, up to the count whose refills have chunks
  // of their own.
  std::array<taken_cache, 16> recent_{};
  unsigned next_ = 0;
};

}  // namespace pmrkit::detail
