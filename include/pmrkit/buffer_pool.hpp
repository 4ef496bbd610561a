// pmrkit/buffer_pool.hpp — reusable byte buffers (Go's sync.Pool, with bounded retention).
//
// acquire(n) hands out a byte_buffer of capacity >= n whose storage comes from the pool's
// memory_resource; when the buffer is destroyed it returns here and its storage is reused by a
// later acquire. Buffers are kept in power-of-two capacity buckets, at most max_per_bucket per
// bucket; a buffer that grew beyond max_capacity (rounded up to a power of two) is freed, not kept,
// so one huge message does not pin its memory forever. Thread-safe: any thread may acquire, and a
// buffer may be returned on any thread; each thread keeps a small cache of its own. The resource
// must outlive the pool, and every buffer must be returned (destroyed) before the pool is.
// Destroying the pool frees every retained buffer.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <memory_resource>

#include "pmrkit/byte_buffer.hpp"

namespace pmrkit {

struct buffer_pool_options {
  std::size_t min_capacity = 256;          // smallest bucket; smaller requests round up to it
  // The largest bucket, rounded up to a power of two: a buffer larger than that is freed on
  // return, and a larger request is served at exactly its size.
  std::size_t max_capacity = 1024 * 1024;
  std::size_t max_per_bucket = 64;         // retained buffers per bucket, all threads together
  // Retained buffers per bucket that one thread keeps for itself, counted within
  // max_per_bucket (at most 1024; capped at max_per_bucket).
  std::size_t thread_buffers_per_bucket = 4;
};

struct buffer_pool_stats {
  std::uint64_t acquires = 0;           // acquire() calls, and growths of pooled buffers
  std::uint64_t hits = 0;               // served from a retained buffer
  std::uint64_t misses = 0;             // a new buffer was allocated from the resource
  std::uint64_t dropped_for_size = 0;   // returned buffers freed: larger than the largest bucket
  std::uint64_t dropped_for_bound = 0;  // returned buffers freed because the bucket was full
  std::uint64_t buffers_retained = 0;   // kept for reuse now, thread caches included
  std::uint64_t bytes_retained = 0;     // their capacity, in bytes
};

class buffer_pool {
 public:
  // Throws std::invalid_argument for a null resource, min_capacity 0 or above 2^62 (the largest
  // power of two a buffer may hold), min_capacity that exceeds max_capacity (both rounded up to
  // a power of two), or thread_buffers_per_bucket above 1024. Buckets stop at 2^62 whatever
  // max_capacity is; larger requests are served at exactly their size.
  explicit buffer_pool(std::pmr::memory_resource* resource = std::pmr::get_default_resource(),
                       buffer_pool_options options = {});
  ~buffer_pool();
  buffer_pool(const buffer_pool&) = delete;
  buffer_pool& operator=(const buffer_pool&) = delete;

  // A buffer of size 0 and capacity >= min_capacity. Throws what the resource throws, and
  // std::length_error if min_capacity cannot be represented. A request above the largest
  // bucket is allocated at exactly its size. A pooled buffer that grows takes its larger block
  // through acquire() too, and gives the smaller one back, so growth is pooled as well.
  byte_buffer acquire(std::size_t min_capacity = 0);

  // Frees every retained buffer (the calling thread's cache and the shared buckets; other
  // threads' caches are drained when those threads next use the pool or exit).
  void trim();

  buffer_pool_stats stats() const;
  const buffer_pool_options& options() const noexcept;
  std::pmr::memory_resource* resource() const noexcept;

 private:
  friend class byte_buffer;
  // Takes back a buffer's storage (called by byte_buffer::reset).
  void give_back(std::byte* data, std::size_t capacity) noexcept;

  struct state;
  std::unique_ptr<state> state_;
};

}  // namespace pmrkit
