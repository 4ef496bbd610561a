#include "pmrkit/counting_resource.hpp"

#include <algorithm>
#include <stdexcept>

namespace pmrkit {

counting_resource::counting_resource(std::pmr::memory_resource* wrapped) : wrapped_(wrapped) {
  if (wrapped == nullptr)
    throw std::invalid_argument("pmrkit: counting_resource was given a null resource");
}

void* counting_resource::do_allocate(std::size_t bytes, std::size_t alignment) {
  void* p = wrapped_->allocate(bytes, alignment);  // count only what succeeded
  allocations_.fetch_add(1, std::memory_order_relaxed);
  bytes_allocated_.fetch_add(bytes, std::memory_order_relaxed);
  // Sequentially consistent (on x86 the same instructions as relaxed): a reset_totals() that
  // lowers the peak either reads this allocation in bytes_in_use after its store, or this
  // allocation reads the lowered peak and raises it (reset_totals, below).
  const std::uint64_t in_use = bytes_in_use_.fetch_add(bytes, std::memory_order_seq_cst) + bytes;
  raise_peak(in_use);
  return p;
}

void counting_resource::do_deallocate(void* p, std::size_t bytes, std::size_t alignment) {
  wrapped_->deallocate(p, bytes, alignment);
  // Release: a reset_totals() that sees this free (acquire) also sees the allocation it undoes,
  // in allocations and in bytes_allocated.
  bytes_in_use_.fetch_sub(bytes, std::memory_order_relaxed);
  bytes_freed_.fetch_add(bytes, std::memory_order_release);
  deallocations_.fetch_add(1, std::memory_order_release);
}

void counting_resource::raise_peak(std::uint64_t in_use) noexcept {
  std::uint64_t peak = peak_bytes_in_use_.load(std::memory_order_seq_cst);
  while (in_use > peak &&
         !peak_bytes_in_use_.compare_exchange_weak(peak, in_use, std::memory_order_seq_cst)) {
  }
}

// Whether a reset ran, or runs, since `generation` was read.
bool counting_resource::reset_running(std::uint64_t generation) const noexcept {
  return resets_running_.load(std::memory_order_seq_cst) != 0 ||
         reset_generation_.load(std::memory_order_seq_cst) != generation;
}

allocation_stats counting_resource::stats() const noexcept {
  allocation_stats s;
  // Frees first: a free is counted (release) after its block's allocation was, so allocations
  // read after it include every block whose free was seen, and blocks_in_use() cannot wrap.
  // A reset_totals() between the two loads breaks that (it lowers one, then the other: the
  // new frees and the old allocations read together show blocks long freed as live), so the
  // two are read again until no reset ran across them.
  for (;;) {
    const std::uint64_t generation = reset_generation_.load(std::memory_order_seq_cst);
    s.deallocations = deallocations_.load(std::memory_order_seq_cst);
    s.allocations = allocations_.load(std::memory_order_seq_cst);
    if (!reset_running(generation) && s.deallocations <= s.allocations) break;
  }
  s.bytes_in_use = bytes_in_use_.load(std::memory_order_relaxed);
  // A reset may lower the peak just after an allocation raised bytes_in_use; never show less.
  s.peak_bytes_in_use =
      std::max(peak_bytes_in_use_.load(std::memory_order_relaxed), s.bytes_in_use);
  s.bytes_allocated = bytes_allocated_.load(std::memory_order_relaxed);
  return s;
}

// The totals drop by what was freed before the reset, read once: allocations and deallocations
// by the same count, bytes_allocated and the bytes freed by the same bytes. Only
// read-modify-writes touch the counters that allocate() and deallocate() also change, so a
// call running at the same time lands on one side of the reset or the other, once.
void counting_resource::reset_totals() noexcept {
  resets_running_.fetch_add(1, std::memory_order_seq_cst);
  const auto freed = deallocations_.load(std::memory_order_acquire);
  deallocations_.fetch_sub(freed, std::memory_order_relaxed);
  allocations_.fetch_sub(freed, std::memory_order_relaxed);
  const auto freed_bytes = bytes_freed_.load(std::memory_order_acquire);
  bytes_freed_.fetch_sub(freed_bytes, std::memory_order_relaxed);
  bytes_allocated_.fetch_sub(freed_bytes, std::memory_order_relaxed);
  // The peak starts over at what is in use. An allocation that raised bytes_in_use after the
  // first load may have read the old, higher peak and left it alone; the read-modify-write after
  // the store reads every such allocation (sequential consistency: one whose peak load comes
  // after the store sees the new peak and raises it itself).
  peak_bytes_in_use_.store(bytes_in_use_.load(std::memory_order_seq_cst),
                           std::memory_order_seq_cst);
  raise_peak(bytes_in_use_.fetch_add(0, std::memory_order_seq_cst));
  reset_generation_.fetch_add(1, std::memory_order_seq_cst);
  resets_running_.fetch_sub(1, std::memory_order_seq_cst);
}

}  // namespace pmrkit
