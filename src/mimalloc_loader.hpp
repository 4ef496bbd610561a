// Internal: mimalloc's functions, reached without letting mimalloc replace the process
// allocator. Debian's libmimalloc.so exports malloc, free and operator new; linking it would
// silently turn every allocation in the user's program (and our new_delete baseline) into
// mimalloc. Loading it with dlopen(RTLD_LOCAL) and looking up only mi_* keeps it private.
#pragma once

#include <cstddef>

namespace pmrkit::detail {

struct mimalloc_api {
  void* (*malloc_aligned)(std::size_t size, std::size_t alignment);
  void (*free_size_aligned)(void* p, std::size_t size, std::size_t alignment);
  void* (*heap_new)();
  void (*heap_destroy)(void* heap);
  void* (*heap_malloc_aligned)(void* heap, std::size_t size, std::size_t alignment);
  void (*free)(void* p);
};

// Loads the library on first use (thread-safe) and keeps it loaded until exit. Throws
// std::runtime_error, naming the library and the package that provides it, if it is missing.
const mimalloc_api& mimalloc();

}  // namespace pmrkit::detail
