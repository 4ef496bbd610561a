// Test-only upstream for the byte_buffer and buffer_pool tests: it checks that every block is
// freed with the exact size and alignment it was allocated with, and can be told to fail.
// Thread-safe (one mutex), so buffers may be freed on any thread; mismatches are counted, not
// asserted, because Catch2 assertions are not thread-safe.
#pragma once

#include <atomic>
#include <cstddef>
#include <limits>
#include <map>
#include <memory_resource>
#include <mutex>
#include <new>

#include "pmrkit/byte_buffer.hpp"

namespace pmrkit::test {

class ledger_resource final : public std::pmr::memory_resource {
 public:
  explicit ledger_resource(std::pmr::memory_resource* upstream = std::pmr::new_delete_resource())
      : upstream_(upstream) {}
  ledger_resource(const ledger_resource&) = delete;
  ledger_resource& operator=(const ledger_resource&) = delete;
  ~ledger_resource() override {
    // A leaked block is reported by blocks_in_use(); free it so the sanitizers report only
    // what the code under test did.
    for (const auto& [p, block] : blocks_) upstream_->deallocate(p, block.bytes, block.alignment);
  }

  // Allocations larger than `bytes` throw std::bad_alloc from now on.
  void fail_above(std::size_t bytes) noexcept { fail_above_.store(bytes); }
  void stop_failing() noexcept { fail_above_.store(std::numeric_limits<std::size_t>::max()); }

  std::size_t blocks_in_use() const {
    std::lock_guard lock(mutex_);
    return blocks_.size();
  }
  // Frees of a pointer this resource did not hand out, or with another size or alignment.
  std::size_t mismatched_frees() const { return mismatched_frees_.load(); }
  // Requests whose alignment is not the one byte_buffer promises.
  std::size_t unexpected_alignments() const { return unexpected_alignments_.load(); }
  std::size_t failed_allocations() const { return failed_allocations_.load(); }

 private:
  struct block_info {
    std::size_t bytes;
    std::size_t alignment;
  };

  void* do_allocate(std::size_t bytes, std::size_t alignment) override {
    if (alignment != byte_buffer::alignment) ++unexpected_alignments_;
    if (bytes > fail_above_.load()) {
      ++failed_allocations_;
      throw std::bad_alloc();
    }
    void* p = upstream_->allocate(bytes, alignment);
    std::lock_guard lock(mutex_);
    blocks_.emplace(p, block_info{bytes, alignment});
    return p;
  }

  void do_deallocate(void* p, std::size_t bytes, std::size_t alignment) override {
    std::lock_guard lock(mutex_);
    const auto found = blocks_.find(p);
    if (found == blocks_.end() || found->second.bytes != bytes ||
        found->second.alignment != alignment) {
      ++mismatched_frees_;
      return;  // leave it recorded; freeing with wrong arguments would be undefined
    }
    blocks_.erase(found);
    upstream_->deallocate(p, bytes, alignment);
  }

  bool do_is_equal(const std::pmr::memory_resource& other) const noexcept override {
    return this == &other;
  }

  std::pmr::memory_resource* upstream_;
  mutable std::mutex mutex_;
  std::map<void*, block_info> blocks_;
  std::atomic<std::size_t> fail_above_{std::numeric_limits<std::size_t>::max()};
  std::atomic<std::size_t> mismatched_frees_{0};
  std::atomic<std::size_t> unexpected_alignments_{0};
  std::atomic<std::size_t> failed_allocations_{0};
};

}  // namespace pmrkit::test
