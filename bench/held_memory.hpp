// How much memory a benchmark row's allocator holds, for the peak_held_bytes counters.
//
// Pool strategies are measured by their counting upstream (exact). Rows whose memory comes from
// a process allocator are measured by that allocator's own statistics or by the kernel:
//   mallinfo2       glibc malloc: arena + hblkhd (bytes glibc holds from the OS), less what the
//                   process had in use when the row started; exact at each sample, sampled
//   mimalloc_stats  mimalloc's committed bytes (mi_process_info); its peak is tracked by mimalloc
//   rss             resident-set high-water mark (VmHWM) less the RSS when the row started; used
//                   under LD_PRELOAD, where the replaced allocator has no statistics we can call
// and reference rows: bare_list by what it took from operator new (upstream), limit rows by
// their static buffers. Single-threaded: one probe per row, used by the row's first thread.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>

namespace pmrkit::bench {

enum class held_method { upstream, mallinfo2, mimalloc_stats, rss, static_buffers };

// The name written to the JSON (context pmrkit_held_method, row label "held=<name>").
std::string_view held_method_name(held_method m) noexcept;

// How a row's held memory is measured: `key` is a strategy spec, or one of the reference rows
// "bare_list", "mimalloc_plain", "limit". `preloaded`: an allocator replaces malloc
// (LD_PRELOAD), so glibc's statistics would not describe it.
held_method held_method_for(std::string_view key, bool preloaded);
// True if LD_PRELOAD names a library (the [preload=...] rows).
bool malloc_is_preloaded();

// Reads a process allocator's held bytes (mallinfo2, mimalloc_stats, rss); for the other
// methods it reads nothing and answers 0.
class process_held_probe {
 public:
  explicit process_held_probe(held_method method) : method_(method) {}
  // Takes the baseline and starts the peak again (mimalloc: mi_stats_reset; rss: writes 5 to
  // /proc/self/clear_refs, which resets VmHWM, where the kernel permits).
  void start();
  // Held now, above the baseline.
  std::uint64_t now() const;
  // Records now() into the peak; for mimalloc and rss the allocator or kernel track the peak
  // between samples themselves, for mallinfo2 only samples count.
  void sample();
  // The most held since start().
  std::uint64_t peak() const;
  held_method method() const noexcept { return method_; }

 private:
  held_method method_;
  std::uint64_t baseline_ = 0;
  std::uint64_t sampled_peak_ = 0;
};

// glibc's mallinfo2: bytes held from the OS (arena + hblkhd) and bytes in use (uordblks + hblkhd).
struct glibc_heap {
  std::uint64_t held;
  std::uint64_t in_use;
};
glibc_heap glibc_heap_now() noexcept;

// A field of /proc/self/status in bytes (e.g. "VmRSS", "VmHWM"); 0 if it cannot be read.
std::uint64_t proc_status_bytes(std::string_view field);

}  // namespace pmrkit::bench
