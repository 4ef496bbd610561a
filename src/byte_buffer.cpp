#include "pmrkit/byte_buffer.hpp"

#include <cstdint>
#include <cstring>
#include <limits>
#include <stdexcept>
#include <string>
#include <utility>

#include "pmrkit/buffer_pool.hpp"

namespace pmrkit {
namespace {

// The largest size a buffer may reach: beyond it pointer arithmetic on data() + size() is not
// representable.
constexpr std::size_t max_buffer_size =
    static_cast<std::size_t>(std::numeric_limits<std::ptrdiff_t>::max());

[[noreturn]] void throw_too_large(const char* operation, std::size_t current, std::size_t added) {
  throw std::length_error(std::string("pmrkit::byte_buffer::") + operation + ": " +
                          std::to_string(current) + " + " + std::to_string(added) +
                          " bytes exceeds the largest buffer size (" +
                          std::to_string(max_buffer_size) + " bytes)");
}

// For a call that asks for a size outright (reserve, resize).
[[noreturn]] void throw_too_large(const char* operation, std::size_t wanted) {
  throw std::length_error(std::string("pmrkit::byte_buffer::") + operation + "(" +
                          std::to_string(wanted) + "): more than the largest buffer size (" +
                          std::to_string(max_buffer_size) + " bytes)");
}

}  // namespace

byte_buffer byte_buffer::make_standalone(std::pmr::memory_resource* resource,
                                         std::size_t capacity) {
  byte_buffer buffer(resource);
  if (capacity > 0) buffer.reserve(capacity);
  return buffer;
}

byte_buffer::byte_buffer(byte_buffer&& other) noexcept
    : resource_(other.resource_),
      pool_(other.pool_),
      data_(std::exchange(other.data_, nullptr)),
      size_(std::exchange(other.size_, 0)),
      capacity_(std::exchange(other.capacity_, 0)) {}

byte_buffer& byte_buffer::operator=(byte_buffer&& other) noexcept {
  if (this != &other) {
    reset();
    resource_ = other.resource_;
    pool_ = other.pool_;
    data_ = std::exchange(other.data_, nullptr);
    size_ = std::exchange(other.size_, 0);
    capacity_ = std::exchange(other.capacity_, 0);
  }
  return *this;
}

void byte_buffer::commit(std::size_t written) {
  if (written > capacity_ - size_) {
    throw std::length_error("pmrkit::byte_buffer::commit(" + std::to_string(written) +
                            "): only " + std::to_string(capacity_ - size_) +
                            " spare bytes were available (size " + std::to_string(size_) +
                            ", capacity " + std::to_string(capacity_) + ")");
  }
  size_ += written;
}

void byte_buffer::reserve(std::size_t capacity) {
  if (capacity <= capacity_) return;
  if (capacity > max_buffer_size) throw_too_large("reserve", capacity);
  grow_to(capacity);
}

void byte_buffer::resize(std::size_t size) {
  if (size > max_buffer_size) throw_too_large("resize", size);
  const std::size_t old_size = size_;
  resize_for_overwrite(size);
  // Pooled storage holds a previous user's bytes; never expose them through resize().
  if (size > old_size) std::memset(data_ + old_size, 0, size - old_size);
}

void byte_buffer::resize_for_overwrite(std::size_t size) {
  if (size > max_buffer_size) throw_too_large("resize_for_overwrite", size);
  reserve(size);
  size_ = size;
}

void byte_buffer::append(std::span<const std::byte> bytes) { append(bytes.data(), bytes.size()); }

void byte_buffer::append(const void* bytes, std::size_t count) {
  if (count == 0) return;
  if (count > max_buffer_size - size_) throw_too_large("append", size_, count);
  const auto* source = static_cast<const std::byte*>(bytes);
  if (size_ + count > capacity_) {
    // Appending part of this buffer to itself: growth frees the old block, so find the bytes
    // again in the new one.
    const auto address = reinterpret_cast<std::uintptr_t>(source);
    const auto begin = reinterpret_cast<std::uintptr_t>(data_);
    const bool aliases = data_ != nullptr && address >= begin && address < begin + size_;
    const std::size_t offset = aliases ? address - begin : 0;
    grow_to(size_ + count);
    if (aliases) source = data_ + offset;
  }
  std::memcpy(data_ + size_, source, count);
  size_ += count;
}

void byte_buffer::reset() noexcept {
  if (data_ == nullptr) return;
  if (pool_ != nullptr) {
    pool_->give_back(data_, capacity_);
  } else {
    resource_->deallocate(data_, capacity_, alignment);
  }
  data_ = nullptr;
  size_ = 0;
  capacity_ = 0;
}

byte_buffer byte_buffer::copy_with_room(std::size_t extra) const {
  if (extra > max_buffer_size - size_) throw_too_large("copy_with_room", size_, extra);
  const std::size_t capacity = size_ + extra;
  byte_buffer copy =
      pool_ != nullptr ? pool_->acquire(capacity) : make_standalone(resource(), capacity);
  if (size_ > 0) std::memcpy(copy.data_, data_, size_);
  copy.size_ = size_;
  return copy;
}

void byte_buffer::grow_to(std::size_t capacity) {
  // Geometric growth keeps a run of appends amortised O(1).
  std::size_t target = capacity;
  if (capacity_ <= max_buffer_size / 2 && capacity_ * 2 > target) target = capacity_ * 2;

  if (pool_ != nullptr) {
    // A pooled buffer takes its larger block from the pool too, so that growth in steady state
    // is served from retained blocks rather than the resource; the old block goes back.
    byte_buffer grown = pool_->acquire(target);
    if (size_ > 0) std::memcpy(grown.data_, data_, size_);
    grown.size_ = size_;
    *this = std::move(grown);
    return;
  }

  std::pmr::memory_resource* const from = resource();
  auto* fresh = static_cast<std::byte*>(from->allocate(target, alignment));
  if (size_ > 0) std::memcpy(fresh, data_, size_);
  if (data_ != nullptr) from->deallocate(data_, capacity_, alignment);
  // Bind to the default resource now, not at free time: the default may change in between,
  // and a block must go back to the resource it came from.
  resource_ = from;
  data_ = fresh;
  capacity_ = target;
}

}  // namespace pmrkit
