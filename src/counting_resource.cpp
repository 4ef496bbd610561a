#include "pmrkit/counting_resource.hpp"

#include <algorithm>

namespace pmrkit {

void* counting_resource::do_allocate(std::size_t bytes, std::size_t alignment) {
  void* p = wrapped_->allocate(bytes, alignment);  // count only what succeeded
  allocations_.fetch_add(1, std::memory_order_relaxed);
  const std::uint64_t in_use = bytes_in_use_.fetch_add(bytes, std::memory_order_relaxed) + bytes;
  // bytes_in_use first, then bytes_allocated with release: a reset_totals() that sees this
  // allocation in bytes_allocated (acquire) also sees it in bytes_in_use, so it never cuts the
  // total below what is in use.
  bytes_allocated_.fetch_add(bytes, std::memory_order_release);
  std::uint64_t peak = peak_bytes_in_use_.load(std::memory_order_relaxed);
  while (in_use > peak &&
         !peak_bytes_in_use_.compare_exchange_weak(peak, in_use, std::memory_order_relaxed)) {
  }
  return p;
}

void counting_resource::do_deallocate(void* p, std::size_t bytes, std::size_t alignment) {
  wrapped_->deallocate(p, bytes, alignment);
  // Release: a reset_totals() that sees this free also sees the allocation it undoes.
  deallocations_.fetch_add(1, std::memory_order_release);
  bytes_in_use_.fetch_sub(bytes, std::memory_order_relaxed);
}

allocation_stats counting_resource::stats() const noexcept {
  allocation_stats s;
  s.allocations = allocations_.load(std::memory_order_relaxed);
  s.deallocations = deallocations_.load(std::memory_order_relaxed);
  s.bytes_in_use = bytes_in_use_.load(std::memory_order_relaxed);
  // A reset may lower the peak just after an allocation raised bytes_in_use; never show less.
  s.peak_bytes_in_use =
      std::max(peak_bytes_in_use_.load(std::memory_order_relaxed), s.bytes_in_use);
  s.bytes_allocated = bytes_allocated_.load(std::memory_order_relaxed);
  return s;
}

// Only read-modify-writes touch the counters that allocate() and deallocate() also change, so
// a call running at the same time lands on one side of the reset or the other and none is
// lost. allocations and deallocations both drop by the same amount: their difference, the
// blocks in use, stays exact whatever the interleaving.
void counting_resource::reset_totals() noexcept {
  const auto freed = deallocations_.load(std::memory_order_acquire);
  deallocations_.fetch_sub(freed, std::memory_order_relaxed);
  allocations_.fetch_sub(freed, std::memory_order_relaxed);
  const auto total = bytes_allocated_.load(std::memory_order_acquire);
  const auto in_use = bytes_in_use_.load(std::memory_order_relaxed);
  if (total > in_use) bytes_allocated_.fetch_sub(total - in_use, std::memory_order_relaxed);
  peak_bytes_in_use_.store(in_use, std::memory_order_relaxed);
}

}  // namespace pmrkit
