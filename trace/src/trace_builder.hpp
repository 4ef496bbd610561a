// Internal: turns address-level events, in the order they happened, into a recorded_trace:
// pairs each free with the live allocation at its address (a new allocation at a freed address
// is a new object), numbers objects and threads, and keeps the live-byte statistics. Both
// readers (pmrkit's stream and heaptrack's) feed it.
#pragma once

#include <cstdint>
#include <string>
#include <unordered_map>

#include "pmrkit/trace/recorded_trace.hpp"

namespace pmrkit::trace::detail {

class trace_builder {
 public:
  explicit trace_builder(std::string format) { trace_.format = std::move(format); }

  // `thread` is the recording's name for it; the trace numbers threads 0, 1, ... in order of
  // their first event.
  void allocate(std::uint64_t time_ns, std::uint64_t thread, std::uint64_t address,
                std::uint64_t size, std::uint8_t alignment_log2);
  void deallocate(std::uint64_t time_ns, std::uint64_t thread, std::uint64_t address);
  recorded_trace finish() &&;

 private:
  struct live_block {
    std::uint64_t object;
    std::uint64_t size;
    std::uint8_t alignment_log2;
  };
  std::uint32_t number_of(std::uint64_t thread) {
    return thread_numbers_.try_emplace(thread, static_cast<std::uint32_t>(thread_numbers_.size()))
        .first->second;
  }
  void free_block(std::uint64_t time_ns, std::uint32_t thread, const live_block& block);

  recorded_trace trace_;
  std::unordered_map<std::uint64_t, live_block> live_;
  std::unordered_map<std::uint64_t, std::uint32_t> thread_numbers_;
};

}  // namespace pmrkit::trace::detail
