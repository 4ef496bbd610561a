// held_pass: the peak held of a strategy that takes no upstream (malloc, new_delete, mimalloc),
// for pmrkit-replay.
//
// Such a strategy's memory comes from a process allocator, so a counting upstream cannot see
// it; the benchmark's probes (bench/held_memory.hpp) can. held_pass replays the trace once more,
// untimed, with the strategy wrapped in a resource that samples the probe after every
// allocation: mallinfo2 for glibc, the resident pages of mimalloc's segments (each block is
// touched, page by page, since the replayer itself never writes to its blocks), or a preloaded
// jemalloc's or tcmalloc's own statistics, the allocators' counting what the replay grows
// (held_baseline::growth: reading the trace leaves free memory that is the replayer's; their
// holdings grow only on an allocation, so sampling after each finds the peak). Only the `rss`
// fallback measures nothing: it would count only pages the replay
// newly touches, while the replaced allocator reuses those the trace's reading freed. The
// probe starts at the first allocation, after the replayer's own bookkeeping is in place.
//
// Thread-safety: one held_pass at a time per process (the probes read process-wide figures).
#pragma once

#include <cstdint>
#include <optional>
#include <string>

#include "pmrkit/trace/replay.hpp"

namespace pmrkit::trace_tools {

struct held_figure {
  std::optional<std::uint64_t> peak_held_bytes;  // empty: the method measures nothing
  std::string method;                            // held_method_name(): "upstream", "mallinfo2", ...
};

// How `spec`'s held memory is measured in this process (LD_PRELOAD set or not).
std::string held_method_of(const std::string& spec);

// Replays `plan` on `spec` (one that uses no upstream) with the probe sampling; returns its peak.
held_figure held_pass(const trace::replay_plan& plan, const std::string& spec);

}  // namespace pmrkit::trace_tools
