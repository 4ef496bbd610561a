// The sizes record_probe allocates, shared with record_preload_test: unusual, so that nothing
// else in the process asks for them.
#pragma once

#include <cstddef>

namespace record_probe_sizes {
constexpr int count = 100;
constexpr int killed_count = 100000;  // several buffers' worth of events
constexpr std::size_t malloc_size = 11111;
constexpr std::size_t new_size = 22223;
constexpr std::size_t aligned_size = 33344;      // aligned_alloc(64)
constexpr std::size_t posix_aligned_size = 44444;  // posix_memalign(128)
constexpr std::size_t aligned_new_size = 12345;  // operator new(align 256)
constexpr std::size_t calloc_size = 5555;
constexpr std::size_t realloc_size = 55555;
constexpr std::size_t thread_size = 6666;
constexpr std::size_t forked_child = 77777;
constexpr std::size_t after_exec = 88888;
constexpr std::size_t around_own_file = 99991;  // closes-descriptors: before and after its file
constexpr std::size_t late_thread = 4321;       // late-frees: one a thread
constexpr int late_threads = 4;
}  // namespace record_probe_sizes
