#include "trace_builder.hpp"

#include <algorithm>
#include <cstddef>
#include <limits>
#include <string>

#include "pmrkit/trace/trace_file.hpp"

namespace pmrkit::trace::detail {

void trace_builder::free_block(std::uint64_t time_ns, std::uint32_t thread,
                               const live_block& block) {
  trace_.operations.push_back({time_ns, block.size, block.object, thread,
                               operation_kind::deallocate, block.alignment_log2});
  trace_.live_bytes_at_end -= block.size;
  --trace_.live_objects_at_end;
}

void trace_builder::allocate(std::uint64_t time_ns, std::uint64_t recorded_thread,
                             std::uint64_t address, std::uint64_t size,
                             std::uint8_t alignment_log2) {
  // No allocator gives a block past PTRDIFF_MAX bytes, so a recording never holds one; refusing
  // it keeps the live-byte sums below 2^64 too (a block that ends another at its address is
  // taken off first).
  constexpr auto largest_block =
      static_cast<std::uint64_t>(std::numeric_limits<std::ptrdiff_t>::max());
  if (size > largest_block)
    throw trace_format_error(trace_.format + ": an allocation of " + std::to_string(size) +
                             " bytes (no allocator gives more than " +
                             std::to_string(largest_block) + ")");
  const std::uint32_t thread = number_of(recorded_thread);
  const live_block block{trace_.objects++, size, alignment_log2};
  auto [it, inserted] = live_.try_emplace(address, block);
  if (!inserted) {  // the recording missed this address's free: end the old object here
    ++trace_.implicit_frees;
    free_block(time_ns, thread, it->second);
    it->second = block;
  }
  if (size > std::numeric_limits<std::uint64_t>::max() - trace_.live_bytes_at_end)
    throw trace_format_error(trace_.format + ": the blocks live at once pass 2^64 bytes (" +
                             std::to_string(trace_.live_objects_at_end + 1) +
                             " blocks; no address space holds them)");
  trace_.operations.push_back(
      {time_ns, size, block.object, thread, operation_kind::allocate, alignment_log2});
  trace_.live_bytes_at_end += size;
  ++trace_.live_objects_at_end;
  trace_.peak_live_bytes = std::max(trace_.peak_live_bytes, trace_.live_bytes_at_end);
}

void trace_builder::deallocate(std::uint64_t time_ns, std::uint64_t recorded_thread,
                               std::uint64_t address) {
  const auto it = live_.find(address);
  if (it == live_.end()) {  // dropped: it names no thread of the replay
    ++trace_.unpaired_frees;
    return;
  }
  free_block(time_ns, number_of(recorded_thread), it->second);
  live_.erase(it);
}

recorded_trace trace_builder::finish() && {
  trace_.threads = static_cast<std::uint32_t>(thread_numbers_.size());
  return std::move(trace_);
}

}  // namespace pmrkit::trace::detail
