// The container ops of issue 12, phase by phase: what pmrkit_bench's Container rows
// (container_workloads.cpp) and pmrkit_interleaved (interleaved.cpp) both run, so the two
// measure the same thing.
//   UnorderedMap  std::pmr::unordered_map<pmr::string, pmr::vector<int>>, 20,000 entries, keys
//                 of 24-64 characters, vectors of 1-16 ints pushed one by one
//   Map           std::pmr::map<pmr::string, pmr::string>, 20,000 entries, keys of 24-64
//                 characters, values of 8-120
//   Document      a tree of pmr::vector / pmr::string nodes shaped like a parsed JSON message:
//                 2,000 records of 8 fields, a nested object and a tag array
// One op = build the container, read it (look every key up and iterate; the document: walk it),
// then destroy it (the maps: erase every other key in the order they were inserted, looked up
// through a key string reused from the read phase, then destroy the rest in the container's own
// order). The inputs are the same in every process (a fixed
// seed). Not thread-safe: an op runs on one thread; the inputs are made once
// (prepare_container_inputs) and only read after.
#pragma once

#include <array>
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <memory_resource>
#include <string_view>

namespace pmrkit::bench {

enum class phase : std::uint8_t { build, read, destroy };
inline constexpr std::array<std::string_view, 3> phase_names = {"build", "read", "destroy"};

// Times the phases of one op; a caller keeps the phases it reports.
class phase_timer {
 public:
  using clock_type = std::chrono::steady_clock;

  void begin(phase p) { started_[index(p)] = clock_type::now(); }
  void end(phase p) {
    const auto elapsed = clock_type::now() - started_[index(p)];
    seconds_[index(p)] += std::chrono::duration<double>(elapsed).count();
  }
  double seconds(phase p) const noexcept { return seconds_[index(p)]; }

 private:
  static std::size_t index(phase p) noexcept { return static_cast<std::size_t>(p); }
  std::array<clock_type::time_point, phase_names.size()> started_{};
  std::array<double, phase_names.size()> seconds_{};
};

// Builds, reads and destroys one container on `r`, timing each phase into `timer`.
using container_op = void (*)(std::pmr::memory_resource* r, phase_timer& timer);

void unordered_map_op(std::pmr::memory_resource* r, phase_timer& timer);
void map_op(std::pmr::memory_resource* r, phase_timer& timer);
void document_op(std::pmr::memory_resource* r, phase_timer& timer);

struct container_workload {
  std::string_view name;  // UnorderedMap, Map, Document
  container_op op;
};
inline constexpr std::array container_workloads = {
    container_workload{"UnorderedMap", unordered_map_op}, container_workload{"Map", map_op},
    container_workload{"Document", document_op}};

// Makes the ops' inputs (tens of milliseconds, once per process), so that no timed op does.
void prepare_container_inputs();

}  // namespace pmrkit::bench
