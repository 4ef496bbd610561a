// Internal: mimalloc's functions, reached without letting mimalloc replace the process
// allocator. Debian's libmimalloc.so exports malloc, free and operator new; linking it would
// silently turn every allocation in the user's program (and our new_delete baseline) into
// mimalloc. Loading it with dlopen(RTLD_LOCAL) and looking up only mi_* keeps it private.
#pragma once

#include <bit>
#include <cstddef>
#include <limits>

namespace pmrkit::detail {

struct mimalloc_api {
  void* (*malloc)(std::size_t size);  // aligned to 16 for sizes that are multiples of 16
  void* (*malloc_aligned)(std::size_t size, std::size_t alignment);
  void* (*heap_new)();
  void (*heap_destroy)(void* heap);
  void* (*heap_malloc)(void* heap, std::size_t size);  // as malloc
  void* (*heap_malloc_aligned)(void* heap, std::size_t size, std::size_t alignment);
  void (*free)(void* p);
  // mi_process_info: times in ms, then current and peak RSS, current and peak committed bytes
  // (mimalloc's own statistics, kept in release builds too), page faults.
  void (*process_info)(std::size_t* elapsed_ms, std::size_t* user_ms, std::size_t* system_ms,
                       std::size_t* current_rss, std::size_t* peak_rss,
                       std::size_t* current_commit, std::size_t* peak_commit,
                       std::size_t* page_faults);
  void (*stats_reset)();  // mi_stats_reset: peaks start again from the current values
};

// mi_malloc and mi_heap_malloc take mimalloc's fastest path, as a program calling malloc would.
// Their blocks are aligned to 16 (MI_MAX_ALIGN_SIZE) only when the size class is a multiple of
// 16: mi_malloc(1), mi_malloc(24) and mi_malloc(0) may answer an address that is 8 mod 16 (8-
// and 24-byte classes). Rounding a 16-aligned request up to a multiple of 16, and 0 up to 16,
// picks such a class; beyond 16 only mi_malloc_aligned will do.
inline constexpr std::size_t mimalloc_malloc_alignment = 16;

// The size to ask mi_malloc for, for a request of `bytes` aligned to `alignment` (at most 16).
// A size within 15 of the largest would wrap to 0 when rounded up; it asks for the largest,
// which mimalloc refuses, so the request fails as it should.
constexpr std::size_t plain_request_size(std::size_t bytes, std::size_t alignment) noexcept {
  constexpr std::size_t most = std::numeric_limits<std::size_t>::max();
  if (alignment <= 8) return bytes;
  if (bytes == 0) return mimalloc_malloc_alignment;
  if (bytes > most - (mimalloc_malloc_alignment - 1)) return most;
  return (bytes + mimalloc_malloc_alignment - 1) & ~(mimalloc_malloc_alignment - 1);
}

// The size to ask mi_malloc_aligned for: mimalloc 2.0.9 (Debian 12) takes power-of-two sized
// small blocks to be naturally aligned, so mi_malloc_aligned(256, 256) (likewise 512 and 1024
// with alignments from 256) returns a block aligned to 128 only. One more byte keeps such
// requests off that path.
constexpr std::size_t aligned_request_size(std::size_t bytes) noexcept {
  return std::has_single_bit(bytes) ? bytes + 1 : bytes;
}

// Loads the library on first use (thread-safe) and keeps it loaded until exit. Throws
// std::runtime_error, naming the library and the package that provides it, if it is missing.
const mimalloc_api& mimalloc();

}  // namespace pmrkit::detail
