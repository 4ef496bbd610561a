// pmrkit/byte_buffer.hpp — a growable, move-only byte buffer on a memory resource.
//
// byte_buffer owns one block from a std::pmr::memory_resource and grows it through that same
// resource. A buffer handed out by a buffer_pool goes back to its pool when destroyed (or on
// reset()); a standalone buffer (make_standalone, or default-constructed then grown) frees its
// block instead. Not thread-safe: one thread at a time uses a buffer, though a buffer may be
// moved to and destroyed on any thread (its pool is thread-safe). The resource, and the pool
// if any, must outlive the buffer.
#pragma once

#include <cstddef>
#include <memory_resource>
#include <span>

namespace pmrkit {

class buffer_pool;

class byte_buffer {
 public:
  // Every block a byte_buffer allocates, frees or hands to its pool has this alignment.
  static constexpr std::size_t alignment = alignof(std::max_align_t);

  // Empty, with no storage; grows from the current default resource.
  byte_buffer() noexcept = default;
  // Empty, with no storage; grows from `resource`.
  explicit byte_buffer(std::pmr::memory_resource* resource) noexcept : resource_(resource) {}
  // A buffer that is not pooled: its storage is freed when it is destroyed.
  static byte_buffer make_standalone(std::pmr::memory_resource* resource, std::size_t capacity);

  byte_buffer(byte_buffer&& other) noexcept;
  byte_buffer& operator=(byte_buffer&& other) noexcept;
  byte_buffer(const byte_buffer&) = delete;
  byte_buffer& operator=(const byte_buffer&) = delete;
  ~byte_buffer() { reset(); }

  std::byte* data() noexcept { return data_; }
  const std::byte* data() const noexcept { return data_; }
  std::size_t size() const noexcept { return size_; }
  std::size_t capacity() const noexcept { return capacity_; }
  bool empty() const noexcept { return size_ == 0; }

  std::span<std::byte> span() noexcept { return {data_, size_}; }
  std::span<const std::byte> span() const noexcept { return {data_, size_}; }
  // The bytes between size() and capacity(): write into them, then commit() how many were
  // written (the recv/compress-into pattern).
  std::span<std::byte> spare() noexcept { return {data_ + size_, capacity_ - size_}; }
  void commit(std::size_t written);  // throws std::length_error if past capacity()

  // Grows capacity to at least `capacity` (geometrically), keeping the contents. These three
  // throw std::length_error past the largest buffer size (PTRDIFF_MAX bytes), and what the
  // pool or resource throws; on failure the buffer is unchanged.
  void reserve(std::size_t capacity);
  // New bytes are zero-filled.
  void resize(std::size_t size);
  // New bytes are left as they are: for data you are about to overwrite (a receive buffer).
  void resize_for_overwrite(std::size_t size);
  void append(std::span<const std::byte> bytes);
  void append(const void* bytes, std::size_t count);
  void clear() noexcept { size_ = 0; }

  // A copy of this buffer's bytes in new storage, from the same pool (or the same resource),
  // with room for exactly `extra` bytes more (unless a pool rounds it up), for an operation
  // that must leave this buffer exactly as it was, storage included, if it fails part way:
  // work in the copy, and move it here once nothing can fail. Exact, because a decompressor
  // sizes its output by its limit; a caller that appends through copies again and again asks
  // for at least the capacity it has, so that its copies double. Throws std::length_error if
  // size() + extra is past the largest buffer size, and what the pool or resource throws.
  byte_buffer copy_with_room(std::size_t extra) const;

  // Gives the storage back now (to the pool, or to the resource) and leaves the buffer empty,
  // still bound to the same resource.
  void reset() noexcept;

  std::pmr::memory_resource* resource() const noexcept {
    return resource_ ? resource_ : std::pmr::get_default_resource();
  }
  buffer_pool* pool() const noexcept { return pool_; }

 private:
  friend class buffer_pool;
  byte_buffer(buffer_pool* pool, std::pmr::memory_resource* resource, std::byte* data,
              std::size_t capacity) noexcept
      : resource_(resource), pool_(pool), data_(data), capacity_(capacity) {}
  void grow_to(std::size_t capacity);

  std::pmr::memory_resource* resource_ = nullptr;
  buffer_pool* pool_ = nullptr;
  std::byte* data_ = nullptr;
  std::size_t size_ = 0;
  std::size_t capacity_ = 0;
};

}  // namespace pmrkit
