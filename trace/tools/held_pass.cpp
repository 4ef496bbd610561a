#include "held_pass.hpp"

#include <malloc.h>

#include <atomic>
#include <memory>
#include <memory_resource>
#include <mutex>

#include "held_memory.hpp"  // bench/: the benchmark's probes, shared with the replay
#include "pmrkit/registry.hpp"

namespace pmrkit::trace_tools {
namespace {

constexpr std::size_t page_bytes = 4096;

// Forwards to the strategy, shows the probe each block (mimalloc_resident counts the segments
// blocks live in) and samples it after each allocation.
class sampling_resource final : public std::pmr::memory_resource {
 public:
  sampling_resource(std::pmr::memory_resource& inner, bench::held_method method)
      : inner_(inner), probe_(method, bench::held_baseline::growth) {}

  std::uint64_t peak() {
    const std::lock_guard lock(mutex_);
    return started_ ? probe_.peak() : 0;
  }

 private:
  void* do_allocate(std::size_t bytes, std::size_t alignment) override {
    std::call_once(start_once_, [this] {
      const std::lock_guard lock(mutex_);
      probe_.start();
      started_ = true;
    });
    void* p = inner_.allocate(bytes, alignment);
    // The replayer never writes to its blocks; a program does. Touch each page so that what
    // the allocator hands out is resident, as it would be in the recorded program.
    for (std::size_t at = 0; at < bytes; at += page_bytes) static_cast<volatile char*>(p)[at] = 0;
    const std::lock_guard lock(mutex_);  // an untimed pass: exact beats fast here
    probe_.note_block(p, bytes);
    probe_.sample();
    return p;
  }
  void do_deallocate(void* p, std::size_t bytes, std::size_t alignment) override {
    inner_.deallocate(p, bytes, alignment);
  }
  bool do_is_equal(const std::pmr::memory_resource& other) const noexcept override {
    return this == &other;
  }

  std::pmr::memory_resource& inner_;
  // Counts what the replay grows: reading the trace left the allocator holding free memory
  // below memory still in use (12 MB of glibc's heap after reading a trace of 3 million
  // malloc/free pairs whose program held 135 KB), which no trim returns and which is the
  // replayer's, not the strategy's (held_baseline::growth).
  bench::process_held_probe probe_;
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
  // what it can back to the kernel first (the probe's baseline counts the rest out).
  if (method == bench::held_method::mallinfo2) ::malloc_trim(0);
  const auto strategy = make_resource(spec, std::pmr::new_delete_resource());
  sampling_resource sampling(*strategy, method);
  trace::replay(plan, sampling);
  figure.peak_held_bytes = sampling.peak();
  return figure;
}

}  // namespace pmrkit::trace_tools
