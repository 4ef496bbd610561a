// The operations of the allocator patterns AllocPairs and AllocMixed, shared by the patterns
// themselves (alloc_patterns.cpp) and by the rows that run them through another layer, such as
// a recorder (recording_workloads.cpp), so both rows do exactly the same work.
#pragma once

#include <benchmark/benchmark.h>

#include <cstddef>
#include <cstdint>
#include <memory_resource>
#include <random>
#include <vector>

namespace pmrkit::bench {

inline constexpr std::size_t pair_size = 64;
inline constexpr std::size_t live_set = 1000;
inline constexpr std::size_t script_length = 1 << 16;  // precomputed random (slot, size) steps

struct step {
  std::uint32_t slot;
  std::uint32_t size;
};

// The same pseudo-random script for every strategy, so they do identical work.
inline const std::vector<step>& mixed_script() {
  static const std::vector<step> script = [] {
    std::mt19937 rng(12345);
    std::uniform_int_distribution<std::uint32_t> slot(0, live_set - 1);
    std::uniform_int_distribution<std::uint32_t> size(8, 4096);
    std::vector<step> s(script_length);
    for (auto& st : s) st = {slot(rng), size(rng)};
    return s;
  }();
  return script;
}

// One op of AllocPairs: allocate(64), then free it.
inline void pair_op(std::pmr::memory_resource* r) {
  void* p = r->allocate(pair_size, alignof(std::max_align_t));
  benchmark::DoNotOptimize(p);
  r->deallocate(p, pair_size, alignof(std::max_align_t));
}

// AllocMixed's live set on one resource: fill() it, then each op() frees a random block and
// allocates a random size in its place; empty() frees what is left.
class mixed_live_set {
 public:
  explicit mixed_live_set(std::pmr::memory_resource* r) : r_(r), live_(live_set) {}
  void fill() {
    const auto& script = mixed_script();
    for (std::size_t i = 0; i < live_set; ++i)
      live_[i] = {r_->allocate(script[i].size, 8), script[i].size};
  }
  void op() {
    const step stp = mixed_script()[at_];
    at_ = (at_ + 1) & (script_length - 1);
    block& b = live_[stp.slot];
    r_->deallocate(b.p, b.size, 8);
    b = {r_->allocate(stp.size, 8), stp.size};
    void* kept = b.p;  // a copy: DoNotOptimize on a struct member let GCC drop the store to b
    benchmark::DoNotOptimize(kept);
  }
  void empty() {
    for (auto& b : live_) r_->deallocate(b.p, b.size, 8);
  }

 private:
  struct block {
    void* p = nullptr;
    std::uint32_t size = 0;
  };
  std::pmr::memory_resource* r_;
  std::vector<block> live_;
  std::size_t at_ = 0;
};

}  // namespace pmrkit::bench
