#include "pmrkit/counting_resource.hpp"

namespace pmrkit {

void* counting_resource::do_allocate(std::size_t bytes, std::size_t alignment) {
  void* p = wrapped_->allocate(bytes, alignment);  // count only what succeeded
  allocations_.fetch_add(1, std::memory_order_relaxed);
  bytes_allocated_.fetch_add(bytes, std::memory_order_relaxed);
  const std::uint64_t in_use = bytes_in_use_.fetch_add(bytes, std::memory_order_relaxed) + bytes;
  std::uint64_t peak = peak_bytes_in_use_.load(std::memory_order_relaxed);
  while (in_use > peak &&
         !peak_bytes_in_use_.compare_exchange_weak(peak, in_use, std::memory_order_relaxed)) {
  }
  return p;
}

void counting_resource::do_deallocate(void* p, std::size_t bytes, std::size_t alignment) {
  wrapped_->deallocate(p, bytes, alignment);
  deallocations_.fetch_add(1, std::memory_order_relaxed);
  bytes_in_use_.fetch_sub(bytes, std::memory_order_relaxed);
}

allocation_stats counting_resource::stats() const noexcept {
  allocation_stats s;
  s.allocations = allocations_.load(std::memory_order_relaxed);
  s.deallocations = deallocations_.load(std::memory_order_relaxed);
  s.bytes_in_use = bytes_in_use_.load(std::memory_order_relaxed);
  s.peak_bytes_in_use = peak_bytes_in_use_.load(std::memory_order_relaxed);
  s.bytes_allocated = bytes_allocated_.load(std::memory_order_relaxed);
  return s;
}

void counting_resource::reset_totals() noexcept {
  const auto in_use = bytes_in_use_.load(std::memory_order_relaxed);
  const auto blocks = allocations_.load(std::memory_order_relaxed) -
                      deallocations_.load(std::memory_order_relaxed);
  allocations_.store(blocks, std::memory_order_relaxed);
  deallocations_.store(0, std::memory_order_relaxed);
  peak_bytes_in_use_.store(in_use, std::memory_order_relaxed);
  bytes_allocated_.store(in_use, std::memory_order_relaxed);
}

}  // namespace pmrkit
