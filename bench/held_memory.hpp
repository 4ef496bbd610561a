// How much memory a benchmark row's allocator holds, for the peak_held_bytes counters.
//
// Pool strategies are measured by their counting upstream (exact). Rows whose memory comes from
// a process allocator are measured by that allocator's own statistics or by the kernel:
//   mallinfo2       glibc malloc: arena + hblkhd (bytes glibc holds from the OS), less what the
//                   process had in use when the row started; exact at each sample, sampled
//   jemalloc_stats  preloaded jemalloc: stats.resident, less what was allocated at the
//                   start; sampled
//   tcmalloc_stats  preloaded tcmalloc: generic.heap_size - tcmalloc.pageheap_unmapped_bytes,
//                   less generic.current_allocated_bytes at the start; sampled
//   mimalloc_resident  mimalloc (private or preloaded): resident pages (mincore) of the mimalloc
//                   segments the row's blocks live in; sampled. Not mimalloc's committed bytes:
//                   Debian's build commits a whole 32 MiB segment that is mostly never touched
//   rss             resident-set high-water mark (VmHWM, reset by clear_refs) less VmRSS at the
//                   start; the fallback under an LD_PRELOAD whose allocator we cannot ask. It
//                   misses memory the allocator kept from before the row (the report then
//                   shows held < live as unmeasured)
// and reference rows: bare_list by what it took from operator new, the probes
// (sharded_pages_probe*) by what they took from their counting upstream (both: upstream), limit
// rows by their static buffers.
// Single-threaded: one probe per row, used by the row's first thread.
// Beside held memory, the page faults a thread takes (thread_page_faults): how often the memory
// a row uses is new to the process.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace pmrkit::bench {

enum class held_method {
  upstream,
  mallinfo2,
  jemalloc_stats,
  tcmalloc_stats,
  mimalloc_resident,
  rss,
  static_buffers
};

// The name written to the JSON (context pmrkit_held_method, row label "held=<name>").
std::string_view held_method_name(held_method m) noexcept;

// How a row's held memory is measured: `key` is a strategy spec, or one of the reference rows
// "bare_list", "mimalloc_plain", "limit", or a probe ("sharded_pages_probe" and the other
// geometries, "sharded_pages_probe_*"). `preloaded`: an allocator replaces malloc (LD_PRELOAD),
// so glibc's statistics would not describe it.
held_method held_method_for(std::string_view key, bool preloaded);
// True if LD_PRELOAD names a library (the [preload=...] rows).
bool malloc_is_preloaded();
// How a preloaded process allocator is measured: found by the statistics functions it exports
// (dlsym(RTLD_DEFAULT)), rss when it exports none we know.
held_method preloaded_allocator_method();

// What a process_held_probe counts as the row's, for the allocators that report both what they
// hold and what is in use (mallinfo2, jemalloc_stats, tcmalloc_stats).
enum class held_baseline {
  // What the allocator holds, less what was in use at start(): free memory it kept from before
  // counts, since the allocator keeps it for this row to reuse. For a benchmark row, whose
  // harness leaves little free.
  in_use_at_start,
  // What the allocator holds beyond what it held at start(), or what is in use beyond what was
  // in use then, whichever is larger: memory others left free before is not the row's, and
  // blocks the row places in it count by what is in use (only fragmentation inside it goes
  // unseen). For the replay's held pass, after the replayer's reading of a trace left
  // megabytes free below memory still in use, where no trim reaches.
  growth,
};

// Reads a process allocator's held bytes (mallinfo2, jemalloc_stats, tcmalloc_stats,
// mimalloc_resident, rss); for the other methods it reads nothing and answers 0.
class process_held_probe {
 public:
  explicit process_held_probe(held_method method,
                              held_baseline baseline = held_baseline::in_use_at_start)
      : method_(method), baseline_kind_(baseline) {}
  // Takes the baseline and starts the peak again (rss: writes 5 to /proc/self/clear_refs,
  // which resets VmHWM, where the kernel permits; mimalloc_resident: forgets its segments).
  void start();
  // mimalloc_resident: a block the row allocated, whose segment then counts; others ignore it.
  void note_block(const void* p, std::size_t bytes);
  // Held now, above the baseline.
  std::uint64_t now() const;
  // Records now() into the peak; for rss the kernel tracks the peak between samples, for the
  // other methods only samples count.
  void sample();
  // The most held since start().
  std::uint64_t peak() const;
  held_method method() const noexcept { return method_; }

 private:
  held_method method_;
  held_baseline baseline_kind_;
  std::uint64_t baseline_ = 0;         // in_use_at_start: in use then; growth: held then
  std::uint64_t in_use_at_start_ = 0;  // growth
  std::uint64_t sampled_peak_ = 0;
  struct span {
    std::uintptr_t begin, end;
  };
  std::vector<span> segments_;  // mimalloc_resident: the segments seen
};

// What a process allocator holds from the OS and what of it is in use, in bytes.
struct allocator_bytes {
  std::uint64_t held;
  std::uint64_t in_use;
};
// glibc's, from mallinfo2: held arena + hblkhd, in use uordblks + hblkhd.
allocator_bytes glibc_heap_now() noexcept;

// A field of /proc/self/status in bytes (e.g. "VmRSS", "VmHWM"); 0 if it cannot be read.
std::uint64_t proc_status_bytes(std::string_view field);

// The page faults (minor and major) the calling thread has taken so far, by the kernel's count
// (getrusage): a system call, no allocation. Behind faults_per_op, the first touches of memory
// a row's timed loop pays for; 0 if it cannot be read.
std::uint64_t thread_page_faults() noexcept;

}  // namespace pmrkit::bench
