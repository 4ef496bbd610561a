#include <mutex>
#include <string>
#include <utility>
#include <vector>

#include "pmrkit/zstd/compressor.hpp"

namespace pmrkit::zstd {
namespace {

constexpr std::size_t max_idle_limit = 4096;

}  // namespace

struct compressor_pool::state {
  explicit state(std::pmr::memory_resource* resource, std::size_t max_idle) : idle(resource) {
    idle.reserve(max_idle);  // so that giving a context back never allocates
  }
  mutable std::mutex mutex;
  std::pmr::vector<compressor> idle;
  std::uint64_t created = 0;
  std::uint64_t reused = 0;
  std::uint64_t dropped = 0;
};

compressor_pool::lease::lease(compressor_pool* pool, compressor&& c) noexcept
    : pool_(pool), compressor_(std::move(c)) {}

compressor_pool::lease::lease(lease&& other) noexcept
    : pool_(std::exchange(other.pool_, nullptr)), compressor_(std::move(other.compressor_)) {}

compressor_pool::lease::~lease() {
  if (pool_) pool_->give_back(std::move(compressor_));
}

compressor_pool::compressor_pool(std::pmr::memory_resource* resource, compressor_options options,
                                 std::size_t max_idle)
    : resource_(resource), options_(options), max_idle_(max_idle) {
  if (resource == nullptr) {
    throw std::invalid_argument("pmrkit::zstd::compressor_pool: null resource");
  }
  if (max_idle > max_idle_limit) {
    throw std::invalid_argument("pmrkit::zstd::compressor_pool: max_idle " +
                                std::to_string(max_idle) + " is out of range: allowed 0.." +
                                std::to_string(max_idle_limit));
  }
  (void)compressor::memory_bound(options);  // rejects bad options now, not at first use
  std::pmr::polymorphic_allocator<std::byte> alloc(resource);
  state_ = alloc.new_object<state>(resource, max_idle);
}

compressor_pool::~compressor_pool() {
  std::pmr::polymorphic_allocator<std::byte>(resource_).delete_object(state_);
}

compressor_pool::lease compressor_pool::acquire() {
  {
    std::lock_guard lock(state_->mutex);
    if (!state_->idle.empty()) {
      compressor c = std::move(state_->idle.back());
      state_->idle.pop_back();
      ++state_->reused;
      return lease(this, std::move(c));
    }
  }
  compressor made(resource_, options_);  // built outside the lock; counted once it exists
  {
    std::lock_guard lock(state_->mutex);
    ++state_->created;
  }
  return lease(this, std::move(made));
}

void compressor_pool::give_back(compressor&& c) noexcept {
  compressor dropped(std::move(c));
  // Only a context like the ones it makes: the next acquire() must get a working compressor
  // with the pool's options, and idle_memory_bytes must be what it keeps of its resource.
  if (dropped.impl_ == nullptr || dropped.resource_ != resource_ ||
      dropped.options_ != options_) {
    return;
  }
  {
    std::lock_guard lock(state_->mutex);
    if (state_->idle.size() < max_idle_) {
      state_->idle.push_back(std::move(dropped));  // capacity reserved: no allocation
      return;
    }
    ++state_->dropped;
  }
  // `dropped` is destroyed here, outside the lock.
}

std::size_t compressor_pool::compress(std::span<const std::byte> source,
                                      byte_buffer& destination) {
  lease l = acquire();
  return l->compress(source, destination);
}

void compressor_pool::trim() {
  // Swap in an empty vector with the same reserved capacity; the contexts are destroyed after
  // the lock is released.
  std::pmr::vector<compressor> doomed(resource_);
  doomed.reserve(max_idle_);
  {
    std::lock_guard lock(state_->mutex);
    doomed.swap(state_->idle);
  }
}

compressor_pool_stats compressor_pool::stats() const {
  std::lock_guard lock(state_->mutex);
  compressor_pool_stats s;
  s.created = state_->created;
  s.reused = state_->reused;
  s.dropped = state_->dropped;
  s.idle = state_->idle.size();
  for (const auto& c : state_->idle) s.idle_memory_bytes += c.memory_bytes();
  return s;
}

}  // namespace pmrkit::zstd
