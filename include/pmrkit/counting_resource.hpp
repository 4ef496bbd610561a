// pmrkit/counting_resource.hpp — allocation statistics for any memory resource.
//
// counting_resource forwards every call to the resource it wraps and counts what passed
// through: use it in front of a strategy (what the application asked for) or as a strategy's
// upstream (what the strategy took from the system). Thread-safe: counters are atomics, with no
// lock, so concurrent use is cheap and a stats() snapshot is consistent per field, not across
// fields (though never with more deallocations than allocations). It does not own the wrapped
// resource, which must outlive it.
#pragma once

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <memory_resource>

namespace pmrkit {

struct allocation_stats {
  std::uint64_t allocations = 0;        // successful allocate() calls
  std::uint64_t deallocations = 0;      // deallocate() calls
  std::uint64_t bytes_in_use = 0;       // allocated and not yet deallocated
  std::uint64_t peak_bytes_in_use = 0;  // high-water mark of bytes_in_use
  std::uint64_t bytes_allocated = 0;    // total since construction or the last reset_totals()
  std::uint64_t blocks_in_use() const noexcept { return allocations - deallocations; }
};

class counting_resource final : public std::pmr::memory_resource {
 public:
  // Throws std::invalid_argument for a null resource.
  explicit counting_resource(
      std::pmr::memory_resource* wrapped = std::pmr::get_default_resource());
  counting_resource(const counting_resource&) = delete;
  counting_resource& operator=(const counting_resource&) = delete;

  allocation_stats stats() const noexcept;
  // Starts the totals again as if the blocks still out had just been allocated: allocations
  // becomes blocks_in_use(), deallocations 0, bytes_allocated and the peak bytes_in_use.
  // Safe while other threads allocate and free: blocks_in_use() and bytes_in_use stay exact,
  // and a call that overlaps the reset is counted before it or after it, never lost.
  void reset_totals() noexcept;
  std::pmr::memory_resource* wrapped() const noexcept { return wrapped_; }

 private:
  void* do_allocate(std::size_t bytes, std::size_t alignment) override;
  void do_deallocate(void* p, std::size_t bytes, std::size_t alignment) override;
  bool do_is_equal(const std::pmr::memory_resource& other) const noexcept override {
    return this == &other;
  }
  void raise_peak(std::uint64_t in_use) noexcept;
  bool reset_running(std::uint64_t generation) const noexcept;

  std::pmr::memory_resource* wrapped_;
  std::atomic<std::uint64_t> allocations_{0};
  std::atomic<std::uint64_t> deallocations_{0};
  std::atomic<std::uint64_t> bytes_in_use_{0};
  std::atomic<std::uint64_t> peak_bytes_in_use_{0};
  std::atomic<std::uint64_t> bytes_allocated_{0};
  std::atomic<std::uint64_t> bytes_freed_{0};  // since construction or the last reset_totals()
  // A reset lowers allocations and deallocations one after the other; stats() reads them again
  // when a reset ran meanwhile (resets_running_ before, reset_generation_ after).
  std::atomic<std::uint32_t> resets_running_{0};
  std::atomic<std::uint64_t> reset_generation_{0};
};

}  // namespace pmrkit
