#include "heap_state.hpp"

#include <benchmark/benchmark.h>
#include <malloc.h>

#include <algorithm>
#include <array>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <iostream>
#include <new>
#include <random>
#include <stdexcept>
#include <string>
#include <vector>

#include "bench_support.hpp"

namespace pmrkit::bench {
namespace {

constexpr std::uint64_t background_bytes = 32u << 20;
// A quarter of the bytes in each class, log-uniform sizes within it. The last class lies above
// glibc's default mmap threshold (128 KiB).
struct size_class {
  std::size_t smallest;
  std::size_t largest;
};
constexpr std::array<size_class, 4> background_classes{
    {{8, 256}, {256, 4096}, {4096, 64 * 1024}, {128 * 1024, 4u << 20}}};
// Freed before the live set is built: glibc then serves blocks up to this size from its heap
// (mmap threshold) and keeps up to twice it free at the heap top (trim threshold).
constexpr std::size_t passing_buffer_bytes = 4u << 20;
constexpr std::uint64_t background_seed = 0x5eed'4ea9;
// More blocks than the set takes (about 125,000: most of them small), so that their sizes' vector
// never grows.
constexpr std::size_t most_background_blocks = 200'000;

class background_set {
 public:
  background_set() = default;
  background_set(const background_set&) = delete;
  background_set& operator=(const background_set&) = delete;
  ~background_set() {
    for (void* p : blocks_) ::operator delete(p);
  }

  void build() {
    if (built_) return;
    built_ = true;
    // The sizes first, in one block above glibc's mmap threshold as it is before the passing
    // buffer raises it: mapped, and unmapped when freed. Made after it, they came from the heap
    // and left a free megabyte in glibc's arena that every mallinfo2 row counted as its own
    // (AllocPairs/new_delete: 741 KB held warm, 51 KB idle).
    std::mt19937_64 rng(background_seed);
    std::vector<std::size_t> sizes;
    sizes.reserve(most_background_blocks);
    for (const size_class& c : background_classes) {
      std::uniform_real_distribution<double> log_size(std::log2(double(c.smallest)),
                                                      std::log2(double(c.largest)));
      for (std::uint64_t total = 0; total < background_bytes / background_classes.size();) {
        const auto size = static_cast<std::size_t>(std::exp2(log_size(rng)));
        sizes.push_back(size);
        total += size;
      }
    }
    std::shuffle(sizes.begin(), sizes.end(), rng);
    pass_a_large_buffer();
    blocks_.reserve(sizes.size());
    for (std::size_t size : sizes) {
      void* p = ::operator new(size);
      std::memset(p, 0xa5, size);  // resident, so an RSS baseline includes it
      blocks_.push_back(p);
      bytes_ += size;
    }
  }
  std::uint64_t bytes() const noexcept { return bytes_; }

 private:
  static void pass_a_large_buffer() {
    void* p = ::operator new(passing_buffer_bytes);
    std::memset(p, 0, passing_buffer_bytes);
    benchmark::DoNotOptimize(p);
    ::operator delete(p);
  }

  bool built_ = false;
  std::vector<void*> blocks_;
  std::uint64_t bytes_ = 0;
};

background_set& the_background_set() {
  static background_set set;
  return set;
}

// What glibc holds from the kernel (arena and mmapped blocks) and what of it is in use.
struct glibc_figures {
  std::uint64_t held;
  std::uint64_t in_use;
};
glibc_figures glibc_now() noexcept {
  const struct mallinfo2 m = ::mallinfo2();
  return {m.arena + m.hblkhd, m.uordblks + m.hblkhd};
}

// HeapStateProbe, registered only when PMRKIT_BENCH_HEAP_PROBE is set (tests/report): while a
// row runs, what the background set holds, and whether freeing a burst of 64 KiB buffers (the
// datagram fresh row's pattern) hands memory back to the kernel. glibc's figures, so only
// meaningful without LD_PRELOAD.
void heap_state_probe(benchmark::State& state) {
  constexpr std::size_t burst = 32;
  constexpr std::size_t buffer_bytes = 64 * 1024;
  std::array<void*, burst> buffers{};
  std::uint64_t trimmed = 0;
  const glibc_figures at_start = glibc_now();
  for (auto _ : state) {
    for (void*& p : buffers) {
      p = std::malloc(buffer_bytes);
      std::memset(p, 0, buffer_bytes);
    }
    const std::uint64_t before = glibc_now().held;
    for (void* p : buffers) std::free(p);
    const std::uint64_t after = glibc_now().held;
    trimmed += before > after ? before - after : 0;
  }
  state.counters["background_live_bytes"] = double(background_live_bytes());
  state.counters["glibc_in_use_bytes"] = double(at_start.in_use);
  state.counters["trimmed_bytes_per_op"] =
      benchmark::Counter(double(trimmed), benchmark::Counter::kAvgIterations);
}

void prepare_from_environment() {
  const char* env = std::getenv("PMRKIT_BENCH_HEAP");
  heap_state state = heap_state::warm;
  try {
    if (env && *env) state = parse_heap_state(env);
  } catch (const std::invalid_argument& e) {
    std::cerr << "PMRKIT_BENCH_HEAP: " << e.what() << '\n';
    std::exit(2);
  }
  const std::uint64_t live = prepare_heap_state(state);
  benchmark::AddCustomContext("pmrkit_heap_state", std::string(heap_state_name(state)));
  benchmark::AddCustomContext("pmrkit_heap_background_bytes", std::to_string(live));
  if (const char* probe = std::getenv("PMRKIT_BENCH_HEAP_PROBE"); probe && *probe)
    benchmark::RegisterBenchmark("HeapStateProbe", heap_state_probe);
}

const bool registered = add_registrar(prepare_from_environment);

}  // namespace

heap_state parse_heap_state(std::string_view text) {
  if (text == "warm") return heap_state::warm;
  if (text == "idle") return heap_state::idle;
  throw std::invalid_argument("unknown heap state '" + std::string(text) +
                              "'; allowed: warm (a live background set, the default), idle");
}

std::string_view heap_state_name(heap_state state) noexcept {
  return state == heap_state::warm ? "warm" : "idle";
}

std::uint64_t prepare_heap_state(heap_state state) {
  if (state == heap_state::warm) the_background_set().build();
  return background_live_bytes();
}

std::uint64_t background_live_bytes() noexcept { return the_background_set().bytes(); }

}  // namespace pmrkit::bench
