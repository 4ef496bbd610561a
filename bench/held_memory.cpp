#include "held_memory.hpp"

#include <dlfcn.h>
#include <malloc.h>
#include <sys/mman.h>
#include <sys/resource.h>
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string_view>

#include "pmrkit/registry.hpp"

namespace pmrkit::bench {
namespace {

std::uint64_t minus_floor(std::uint64_t a, std::uint64_t b) { return a > b ? a - b : 0; }

template <class Fn>
Fn process_symbol(const char* name) {
  return reinterpret_cast<Fn>(dlsym(RTLD_DEFAULT, name));
}

// jemalloc's mallctl, found only where jemalloc replaced malloc. stats.resident counts every
// page jemalloc keeps resident: live blocks, dirty pages it caches for reuse, its metadata.
using mallctl_fn = int (*)(const char*, void*, std::size_t*, void*, std::size_t);

std::uint64_t jemalloc_stat(const char* name) {
  static const auto mallctl = process_symbol<mallctl_fn>("mallctl");
  if (!mallctl) return 0;
  std::size_t value = 0, size = sizeof value;
  return mallctl(name, &value, &size, nullptr, 0) == 0 ? value : 0;
}

void jemalloc_refresh() {  // jemalloc's statistics are a snapshot taken at each "epoch"
  static const auto mallctl = process_symbol<mallctl_fn>("mallctl");
  std::uint64_t epoch = 1;
  std::size_t size = sizeof epoch;
  if (mallctl) mallctl("epoch", &epoch, &size, &epoch, size);
}

// gperftools' C API (malloc_extension_c.h).
using tcmalloc_property_fn = int (*)(const char*, std::size_t*);

std::uint64_t tcmalloc_stat(const char* name) {
  static const auto get =
      process_symbol<tcmalloc_property_fn>("MallocExtension_GetNumericProperty");
  std::size_t value = 0;
  return get && get(name, &value) ? value : 0;
}

std::uint64_t tcmalloc_held() {  // mapped from the OS and not given back
  return minus_floor(tcmalloc_stat("generic.heap_size"),
                     tcmalloc_stat("tcmalloc.pageheap_unmapped_bytes"));
}

// mimalloc 2.x places every block in a segment aligned to (and, but for huge blocks, sized)
// 32 MiB; the segment's first pages hold its metadata.
constexpr std::uintptr_t mimalloc_segment_size = std::uintptr_t{1} << 25;

// Whether [at, at + bytes) is mapped: mincore fails (ENOMEM) on any unmapped page in it.
bool mapped(std::uintptr_t at, std::size_t bytes, unsigned char* pages) {
  return mincore(reinterpret_cast<void*>(at), bytes, pages) == 0;
}

// Resident bytes of [begin, end), read a MiB at a time (never past `end`) so that a smaller
// (huge-block) segment or one given back since counts only where it is mapped. A step that is
// partly unmapped (a mapping that ends inside it) counts its mapped start, found by halving:
// a mapping here starts at a segment's start, so the mapped part of a step is a prefix, and a
// step unmapped at its first page is skipped in one call (the rest of a huge block's slot).
std::uint64_t resident_bytes(std::uintptr_t begin, std::uintptr_t end) {
  static const std::size_t page = static_cast<std::size_t>(sysconf(_SC_PAGESIZE));
  constexpr std::size_t step = std::size_t{1} << 20;
  std::vector<unsigned char> pages(step / page);
  std::uint64_t resident = 0;
  for (std::uintptr_t at = begin; at < end; at += step) {
    const std::size_t count =
        (static_cast<std::size_t>(std::min<std::uintptr_t>(step, end - at)) + page - 1) / page;
    std::size_t mapped_pages = count;
    if (!mapped(at, count * page, pages.data())) {
      if (!mapped(at, page, pages.data())) continue;
      std::size_t low = 1;         // pages known mapped
      std::size_t high = count;    // pages known not all mapped
      while (high - low > 1) {
        const std::size_t middle = low + (high - low) / 2;
        if (mapped(at, middle * page, pages.data())) low = middle;
        else high = middle;
      }
      mapped_pages = low;
      if (!mapped(at, mapped_pages * page, pages.data())) continue;  // changed meanwhile
    }
    for (std::size_t i = 0; i < mapped_pages; ++i) resident += (pages[i] & 1u) ? page : 0;
  }
  return resident;
}

}  // namespace

std::string_view held_method_name(held_method m) noexcept {
  switch (m) {
    case held_method::upstream: return "upstream";
    case held_method::mallinfo2: return "mallinfo2";
    case held_method::jemalloc_stats: return "jemalloc_stats";
    case held_method::tcmalloc_stats: return "tcmalloc_stats";
    case held_method::mimalloc_resident: return "mimalloc_resident";
    case held_method::rss: return "rss";
    case held_method::static_buffers: return "static";
  }
  return "unknown";
}

bool malloc_is_preloaded() {
  // Any preloaded library but pmrkit's own heap counter, which forwards to glibc's malloc
  // (or to the allocator preloaded after it).
  const char* preload = std::getenv("LD_PRELOAD");
  if (!preload) return false;
  std::string_view rest(preload);
  while (!rest.empty()) {
    const std::size_t end = rest.find_first_of(": ");
    const std::string_view entry = rest.substr(0, end);
    if (!entry.empty() && !entry.ends_with("libpmrkit_heap_counter.so")) return true;
    if (end == std::string_view::npos) break;
    rest.remove_prefix(end + 1);
  }
  return false;
}

held_method preloaded_allocator_method() {
  if (dlsym(RTLD_DEFAULT, "mallctl")) return held_method::jemalloc_stats;
  if (dlsym(RTLD_DEFAULT, "MallocExtension_GetNumericProperty"))
    return held_method::tcmalloc_stats;
  // pmrkit's private mimalloc is loaded RTLD_LOCAL: only a preloaded one is found here.
  if (dlsym(RTLD_DEFAULT, "mi_malloc")) return held_method::mimalloc_resident;
  return held_method::rss;
}

held_method held_method_for(std::string_view key, bool preloaded) {
  if (key == "limit") return held_method::static_buffers;
  if (key == "bare_list" || key.starts_with("sharded_pages_probe")) return held_method::upstream;
  if (key == "mimalloc_plain") return held_method::mimalloc_resident;
  const strategy_info info = describe_strategy(std::string(key));
  if (info.uses_upstream) return held_method::upstream;
  if (info.name.rfind("mimalloc", 0) == 0) return held_method::mimalloc_resident;
  return preloaded ? preloaded_allocator_method() : held_method::mallinfo2;
}

allocator_bytes glibc_heap_now() noexcept {
  const struct mallinfo2 m = ::mallinfo2();
  return {m.arena + m.hblkhd, m.uordblks + m.hblkhd};
}

std::uint64_t thread_page_faults() noexcept {
  rusage usage{};
  if (::getrusage(RUSAGE_THREAD, &usage) != 0) return 0;
  return static_cast<std::uint64_t>(usage.ru_minflt) + static_cast<std::uint64_t>(usage.ru_majflt);
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

namespace {

// What an allocator that reports both holds and has in use; {0, 0} for the other methods.
allocator_bytes allocator_reading(held_method method) {
  switch (method) {
    case held_method::mallinfo2: return glibc_heap_now();
    case held_method::jemalloc_stats:
      jemalloc_refresh();
      return {jemalloc_stat("stats.resident"), jemalloc_stat("stats.allocated")};
    case held_method::tcmalloc_stats:
      return {tcmalloc_held(), tcmalloc_stat("generic.current_allocated_bytes")};
    default: return {0, 0};
  }
}

bool reports_held_and_in_use(held_method method) {
  return method == held_method::mallinfo2 || method == held_method::jemalloc_stats ||
         method == held_method::tcmalloc_stats;
}

}  // namespace

void process_held_probe::start() {
  sampled_peak_ = 0;
  segments_.clear();
  if (reports_held_and_in_use(method_)) {
    // in_use_at_start: what others (the harness, earlier rows) have in use is not this row's;
    // memory the allocator holds free is, whoever freed it: the allocator keeps it for this
    // row to reuse. growth: see held_baseline.
    const allocator_bytes now = allocator_reading(method_);
    baseline_ = baseline_kind_ == held_baseline::growth ? now.held : now.in_use;
    in_use_at_start_ = now.in_use;
    return;
  }
  switch (method_) {
    case held_method::rss: {
      if (std::FILE* f = std::fopen("/proc/self/clear_refs", "w")) {
        std::fputs("5", f);  // resets the peak RSS to the current RSS
        std::fclose(f);
      }
      baseline_ = proc_status_bytes("VmRSS");
      break;
    }
    default: baseline_ = 0;  // mimalloc_resident counts only the row's segments
  }
}

void process_held_probe::note_block(const void* p, std::size_t bytes) {
  if (method_ != held_method::mimalloc_resident || !p) return;
  const auto at = reinterpret_cast<std::uintptr_t>(p);
  const std::uintptr_t begin = at & ~(mimalloc_segment_size - 1);
  // A huge block's segment reaches as far as the block does.
  const std::uintptr_t end = std::max(begin + mimalloc_segment_size, at + bytes);
  const auto known = std::find_if(segments_.begin(), segments_.end(),
                                  [&](const span& s) { return s.begin == begin; });
  if (known == segments_.end())
    segments_.push_back({begin, end});
  else
    known->end = std::max(known->end, end);
}

std::uint64_t process_held_probe::now() const {
  if (reports_held_and_in_use(method_)) {
    const allocator_bytes now = allocator_reading(method_);
    const std::uint64_t held = minus_floor(now.held, baseline_);
    if (baseline_kind_ == held_baseline::in_use_at_start) return held;
    return std::max(held, minus_floor(now.in_use, in_use_at_start_));
  }
  switch (method_) {
    case held_method::mimalloc_resident: {
      std::uint64_t resident = 0;
      for (const span& segment : segments_) resident += resident_bytes(segment.begin, segment.end);
      return resident;
    }
    case held_method::rss: return minus_floor(proc_status_bytes("VmRSS"), baseline_);
    default: return 0;
  }
}

void process_held_probe::sample() { sampled_peak_ = std::max(sampled_peak_, now()); }

std::uint64_t process_held_probe::peak() const {
  if (method_ == held_method::rss)
    return std::max(sampled_peak_, minus_floor(proc_status_bytes("VmHWM"), baseline_));
  return sampled_peak_;
}

}  // namespace pmrkit::bench
