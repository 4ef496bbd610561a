// Shared by the conformance test files: every strategy of the registry (with the test-only
// ones: these tests link pmrkit_with_test_strategies), and an upstream that checks every
// deallocate against a live allocation.
#pragma once

#include <cstddef>
#include <map>
#include <memory_resource>
#include <mutex>
#include <string>
#include <vector>

#include "pmrkit/registry.hpp"

namespace pmrkit::test {

// The names of strategies(), i.e. every strategy this build offers: not a hand-picked list.
inline std::vector<std::string> all_strategy_names() {
  std::vector<std::string> names;
  for (const auto& info : strategies()) names.push_back(info.name);
  return names;
}

// The names of the strategies that promise thread safety (strategy_info::thread_safe).
inline std::vector<std::string> thread_safe_strategy_names() {
  std::vector<std::string> names;
  for (const auto& info : strategies())
    if (info.thread_safe) names.push_back(info.name);
  return names;
}

// An upstream that records each live block and flags any deallocate that does not match an
// earlier allocate exactly (pointer, size and alignment). Thread-safe.
class tracking_upstream final : public std::pmr::memory_resource {
 public:
  struct block {
    std::size_t bytes;
    std::size_t alignment;
  };
  std::size_t live_blocks() const {
    const std::lock_guard guard(lock_);
    return live_.size();
  }
  std::size_t live_bytes() const {
    const std::lock_guard guard(lock_);
    std::size_t total = 0;
    for (const auto& [p, b] : live_) total += b.bytes;
    return total;
  }
  std::size_t allocations() const {
    const std::lock_guard guard(lock_);
    return allocations_;
  }
  std::size_t mismatched_deallocations() const {
    const std::lock_guard guard(lock_);
    return mismatches_;
  }

 private:
  void* do_allocate(std::size_t bytes, std::size_t alignment) override {
    void* p = std::pmr::new_delete_resource()->allocate(bytes, alignment);
    const std::lock_guard guard(lock_);
    live_[p] = {bytes, alignment};
    ++allocations_;
    return p;
  }
  void do_deallocate(void* p, std::size_t bytes, std::size_t alignment) override {
    {
      const std::lock_guard guard(lock_);
      const auto it = live_.find(p);
      if (it == live_.end() || it->second.bytes != bytes || it->second.alignment != alignment) {
        ++mismatches_;
        return;  // never hand a bad pointer to the real heap
      }
      live_.erase(it);
    }
    std::pmr::new_delete_resource()->deallocate(p, bytes, alignment);
  }
  bool do_is_equal(const std::pmr::memory_resource& other) const noexcept override {
    return this == &other;
  }

  mutable std::mutex lock_;
  std::map<void*, block> live_;
  std::size_t allocations_ = 0;
  std::size_t mismatches_ = 0;
};

}  // namespace pmrkit::test
