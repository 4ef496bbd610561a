// pmrkit/trace/recorded_trace.hpp — a program's allocations as the replay uses them: every
// allocate and deallocate in the order they happened, each naming its object, thread, size and
// alignment, and what reading the recording found (docs/replay.md).
//
// Plain data: immutable once read, safe to share between threads for reading.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

namespace pmrkit::trace {

enum class operation_kind : std::uint8_t { allocate, deallocate };

struct operation {
  std::uint64_t time_ns;   // since the recording started
  std::uint64_t size;      // a deallocate carries its allocation's size and alignment
  std::uint64_t object;    // 0, 1, 2, ... in order of allocation; freed at most once
  std::uint32_t thread;    // 0, 1, 2, ... in order of first event
  operation_kind kind;
  std::uint8_t alignment_log2;
  std::size_t alignment() const noexcept { return std::size_t{1} << alignment_log2; }
};

struct recorded_trace {
  // Sorted by time; one thread's operations keep the order it made them, and every deallocate
  // comes after the allocate of its object.
  std::vector<operation> operations;
  std::uint32_t threads = 0;
  std::uint64_t objects = 0;
  std::string format;  // "pmrkit trace v1" or "heaptrack"

  // What pairing frees with allocations found. A free of an address with no live object
  // (memory from before the recording started) is dropped; an allocation at an address still
  // live (a free the recording missed) ends the old object there.
  std::uint64_t unpaired_frees = 0;
  std::uint64_t implicit_frees = 0;

  // Bytes asked for and not yet freed, in the operations' order.
  std::uint64_t peak_live_bytes = 0;
  std::uint64_t live_bytes_at_end = 0;
  std::uint64_t live_objects_at_end = 0;
};

}  // namespace pmrkit::trace
