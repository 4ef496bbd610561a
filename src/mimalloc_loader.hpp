// Internal: mimalloc's functions, reached without letting mimalloc replace the process
// allocator. Debian's libmimalloc.so exports malloc, free and operator new; linking it would
// silently turn every allocation in the user's program (and our new_delete baseline) into
// mimalloc. Loading it with dlopen(RTLD_LOCAL) and looking up only mi_* keeps it private.
#pragma once

#include <cstddef>

namespace pmrkit::detail {

struct mimalloc_api {
  void* (*malloc)(std::size_t size);  // 16-byte aligned (MI_MAX_ALIGN_SIZE)
  void* (*malloc_aligned)(std::size_t size, std::size_t alignment);
  void* (*heap_new)();
  void (*heap_destroy)(void* heap);
  void* (*heap_malloc)(void* heap, std::size_t size);  // 16-byte aligned
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

// Loads the library on first use (thread-safe) and keeps it loaded until exit. Throws
// std::runtime_error, naming the library and the package that provides it, if it is missing.
const mimalloc_api& mimalloc();

}  // namespace pmrkit::detail
