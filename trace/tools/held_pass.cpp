#include "held_pass.hpp"

#include <malloc.h>

#include <algorithm>
#include <atomic>
#include <memory>
#include <memory_resource>
#include <mutex>

#include "held_memory.hpp"  // bench/: the benchmark's probes, shared with the replay
#include "pmrkit/registry.hpp"

namespace pmrkit::trace_tools {
namespace {

constexpr std::size_t page_bytes = 4096;

// glibc's holdings as the replay grows them. Reading the trace leaves free gaps in glibc's heap
// below the plan's live memory, which malloc_trim cannot hand back (12 MB after reading a trace
// of 3 million malloc/free pairs whose program held 135 KB); mallinfo2 counts free memory as
// held, so the benchmark's probe, which charges a row all that glibc holds beyond what is in
// use at its start, would charge the replayed strategy for the replayer's reading. Counted
// instead: what glibc holds beyond what it held at the start, or what it has in use (blocks and
// their headers) beyond the start, whichever is larger; blocks that land in the old gaps raise
// the second. It cannot count the replayer's memory; it misses only fragmentation inside the
// old gaps.
class glibc_growth {
 public:
  void start() noexcept {
    const bench::glibc_heap now = bench::glibc_heap_now();
    held_at_start_ = now.held;
    in_use_at_start_ = now.in_use;
    peak_ = 0;
  }
  void sample() noexcept {
    const bench::glibc_heap now = bench::glibc_heap_now();
    const std::uint64_t held = now.held > held_at_start_ ? now.held - held_at_start_ : 0;
    const std::uint64_t used = now.in_use > in_use_at_start_ ? now.in_use - in_use_at_start_ : 0;
    peak_ = std::max({peak_, held, used});
  }
  std::uint64_t peak() const noexcept { return peak_; }

 private:
  std::uint64_t held_at_start_ = 0;
  std::uint64_t in_use_at_start_ = 0;
  std::uint64_t peak_ = 0;
};

// Forwards to the strategy, shows the probe each block (mimalloc_resident counts the segments
// blocks live in) and samples it after each allocation.
class sampling_resource final : public std::pmr::memory_resource {
 public:
  sampling_resource(std::pmr::memory_resource& inner, bench::held_method method)
      : inner_(inner), probe_(method), glibc_(method == bench::held_method::mallinfo2) {}

  std::uint64_t peak() {
    const std::lock_guard lock(mutex_);
    if (!started_) return 0;
    return glibc_ ? glibc_growth_.peak() : probe_.peak();
  }

 private:
  void* do_allocate(std::size_t bytes, std::size_t alignment) override {
    std::call_once(start_once_, [this] {
      const std::lock_guard lock(mutex_);
      if (glibc_) {
        glibc_growth_.start();
      } else {
        probe_.start();
      }
      started_ = true;
    });
    void* p = inner_.allocate(bytes, alignment);
    // The replayer never writes to its blocks; a program does. Touch each page so that what
    // the allocator hands out is resident, as it would be in the recorded program.
    for (std::size_t at = 0; at < bytes; at += page_bytes) static_cast<volatile char*>(p)[at] = 0;
    const std::lock_guard lock(mutex_);  // an untimed pass: exact beats fast here
    if (glibc_) {
      glibc_growth_.sample();
    } else {
      probe_.note_block(p, bytes);
      probe_.sample();
    }
    return p;
  }
  void do_deallocate(void* p, std::size_t bytes, std::size_t alignment) override {
    inner_.deallocate(p, bytes, alignment);
  }
  bool do_is_equal(const std::pmr::memory_resource& other) const noexcept override {
    return this == &other;
  }

  std::pmr::memory_resource& inner_;
  bench::process_held_probe probe_;
  const bool glibc_;
  glibc_growth glibc_growth_;
  std::once_flag start_once_;
  std::mutex mutex_;
  bool started_ = false;
};

}  // namespace

std::string held_method_of(const std::string& spec) {
  return std::string(bench::held_method_name(
      bench::held_method_for(spec, bench::malloc_is_preloaded())));
}

held_figure held_pass(const trace::replay_plan& plan, const std::string& spec) {
  const bench::held_method method = bench::held_method_for(spec, bench::malloc_is_preloaded());
  held_figure figure{std::nullopt, std::string(bench::held_method_name(method))};
  // The resident set is no measure here: a preloaded allocator serves the replay from pages
  // the trace's reading already made resident and freed, so its growth says next to nothing.
  // Allocators' own statistics are (upstream-taking strategies are measured by the replay).
  if (method == bench::held_method::rss) return figure;
  // Reading the trace left glibc holding free memory (the file's bytes, vectors outgrown): hand
  // what it can back to the kernel first, so that the replay's growth starts from less
  // (glibc_growth counts the rest out).
  if (method == bench::held_method::mallinfo2) ::malloc_trim(0);
  const auto strategy = make_resource(spec, std::pmr::new_delete_resource());
  sampling_resource sampling(*strategy, method);
  trace::replay(plan, sampling);
  figure.peak_held_bytes = sampling.peak();
  return figure;
}

}  // namespace pmrkit::trace_tools
