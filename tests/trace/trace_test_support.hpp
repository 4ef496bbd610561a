// Shared by the trace tests: a sink that keeps the stream in memory, and counting helpers.
#pragma once

#include <cstddef>
#include <cstdint>
#include <span>
#include <vector>

#include "pmrkit/recording_resource.hpp"
#include "pmrkit/trace/recorded_trace.hpp"

namespace trace_test {

class memory_sink final : public pmrkit::trace_sink {
 public:
  void write(std::span<const std::byte> bytes) override {
    stream.insert(stream.end(), bytes.begin(), bytes.end());
    ++writes;
  }
  std::vector<std::byte> stream;
  std::size_t writes = 0;
};

inline std::size_t count_ops(const pmrkit::trace::recorded_trace& trace,
                             pmrkit::trace::operation_kind kind, std::uint64_t size) {
  std::size_t n = 0;
  for (const auto& op : trace.operations) n += op.kind == kind && op.size == size;
  return n;
}

}  // namespace trace_test
