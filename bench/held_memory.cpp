#include "held_memory.hpp"

#include <malloc.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <cstring>

#include "mimalloc_loader.hpp"
#include "pmrkit/registry.hpp"

namespace pmrkit::bench {
namespace {

struct mimalloc_commit {
  std::uint64_t current;
  std::uint64_t peak;
};

mimalloc_commit mimalloc_commit_now() {
  std::size_t unused = 0, current = 0, peak = 0;
  detail::mimalloc().process_info(&unused, &unused, &unused, &unused, &unused, &current, &peak,
                                  &unused);
  return {current, peak};
}

// mi_stats_reset zeroes mimalloc's counters, "current" committed bytes included, so after a
// reset they count from there (and a decommit makes "current" negative, which
// mi_process_info hands back as a huge size_t). The committed bytes at the last reset, summed
// over resets, turn them back into absolute values.
std::int64_t mimalloc_committed_at_reset = 0;

std::uint64_t mimalloc_absolute(std::uint64_t since_reset) {
  const auto sum = mimalloc_committed_at_reset + static_cast<std::int64_t>(since_reset);
  return sum > 0 ? static_cast<std::uint64_t>(sum) : 0;
}

std::uint64_t minus_floor(std::uint64_t a, std::uint64_t b) { return a > b ? a - b : 0; }

}  // namespace

std::string_view held_method_name(held_method m) noexcept {
  switch (m) {
    case held_method::upstream: return "upstream";
    case held_method::mallinfo2: return "mallinfo2";
    case held_method::mimalloc_stats: return "mimalloc_stats";
    case held_method::rss: return "rss";
    case held_method::static_buffers: return "static";
  }
  return "unknown";
}

bool malloc_is_preloaded() {
  const char* preload = std::getenv("LD_PRELOAD");
  return preload && *preload;
}

held_method held_method_for(std::string_view key, bool preloaded) {
  if (key == "limit") return held_method::static_buffers;
  if (key == "bare_list") return held_method::upstream;
  if (key == "mimalloc_plain") return held_method::mimalloc_stats;
  const strategy_info info = describe_strategy(std::string(key));
  if (info.uses_upstream) return held_method::upstream;
  if (info.name.rfind("mimalloc", 0) == 0) return held_method::mimalloc_stats;
  return preloaded ? held_method::rss : held_method::mallinfo2;
}

glibc_heap glibc_heap_now() noexcept {
  const struct mallinfo2 m = ::mallinfo2();
  return {m.arena + m.hblkhd, m.uordblks + m.hblkhd};
}

std::uint64_t proc_status_bytes(std::string_view field) {
  std::FILE* f = std::fopen("/proc/self/status", "r");
  if (!f) return 0;
  char line[256];
  std::uint64_t kib = 0;
  while (std::fgets(line, sizeof line, f)) {
    if (std::strncmp(line, field.data(), field.size()) == 0 && line[field.size()] == ':') {
      kib = std::strtoull(line + field.size() + 1, nullptr, 10);
      break;
    }
  }
  std::fclose(f);
  return kib * 1024;
}

void process_held_probe::start() {
  sampled_peak_ = 0;
  switch (method_) {
    case held_method::mallinfo2:
      // What others (the harness, earlier rows) have in use is not this row's; memory glibc
      // holds free is, whoever freed it: the allocator keeps it for this row to reuse.
      baseline_ = glibc_heap_now().in_use;
      break;
    case held_method::mimalloc_stats: {
      // Loaded privately, mimalloc holds only what strategies took from it: its committed
      // bytes need no baseline. The peak starts again here.
      mimalloc_committed_at_reset =
          static_cast<std::int64_t>(mimalloc_absolute(mimalloc_commit_now().current));
      detail::mimalloc().stats_reset();
      baseline_ = 0;
      break;
    }
    case held_method::rss: {
      if (std::FILE* f = std::fopen("/proc/self/clear_refs", "w")) {
        std::fputs("5", f);  // resets the peak RSS to the current RSS
        std::fclose(f);
      }
      baseline_ = proc_status_bytes("VmRSS");
      break;
    }
    default: baseline_ = 0;
  }
}

std::uint64_t process_held_probe::now() const {
  switch (method_) {
    case held_method::mallinfo2: return minus_floor(glibc_heap_now().held, baseline_);
    case held_method::mimalloc_stats: return mimalloc_absolute(mimalloc_commit_now().current);
    case held_method::rss: return minus_floor(proc_status_bytes("VmRSS"), baseline_);
    default: return 0;
  }
}

void process_held_probe::sample() { sampled_peak_ = std::max(sampled_peak_, now()); }

std::uint64_t process_held_probe::peak() const {
  switch (method_) {
    case held_method::mimalloc_stats:
      return std::max(sampled_peak_, mimalloc_absolute(mimalloc_commit_now().peak));
    case held_method::rss:
      return std::max(sampled_peak_, minus_floor(proc_status_bytes("VmHWM"), baseline_));
    default: return sampled_peak_;
  }
}

}  // namespace pmrkit::bench
