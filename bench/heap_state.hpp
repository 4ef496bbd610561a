// The process heap's state while pmrkit_bench's rows run: warm (the default) or idle.
//
// A row's time can depend on what else the process's heap holds: with nothing else on it, glibc
// hands a freed 64 KiB buffer back to the kernel (the heap top is above its trim threshold) and
// faults it in again on the next allocation; a long-running service's heap rarely does that
// (docs/benchmarks.md, "Heap state").
//   warm  before any row runs, a background live set of mixed blocks (8 B..64 KiB, some up to
//         4 MiB; 32 MiB in all) is allocated through operator new, written so that it is
//         resident, and kept alive until the process exits; before it, one 4 MiB buffer is
//         allocated and freed, as a service's passing request buffer would be, which moves
//         glibc's dynamic mmap and trim thresholds where such a service's are.
//   idle  the heap as start-up left it.
// PMRKIT_BENCH_HEAP=warm|idle (unset or empty: warm) is read once, by a registrar (see
// add_registrar) that runs after the command line is parsed and before any benchmark; it writes
// pmrkit_heap_state and pmrkit_heap_background_bytes into the JSON context. The set exists
// before any row starts, so each row's memory baselines and allocation counts exclude it.
// Not thread-safe: prepared once on the main thread, before benchmark threads exist.
#pragma once

#include <cstdint>
#include <string_view>

namespace pmrkit::bench {

enum class heap_state { warm, idle };

// "warm" or "idle"; throws std::invalid_argument naming the allowed values otherwise.
heap_state parse_heap_state(std::string_view text);
std::string_view heap_state_name(heap_state state) noexcept;

// Builds the state (once per process; a second call changes nothing) and returns the bytes the
// background set keeps live: 0 when idle.
std::uint64_t prepare_heap_state(heap_state state);
// The bytes the background set keeps live now (0 before prepare_heap_state, or when idle).
std::uint64_t background_live_bytes() noexcept;

}  // namespace pmrkit::bench
