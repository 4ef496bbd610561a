// pmrkit/zstd/compressor.hpp — zstd compression into caller-supplied pooled buffers, with the
// context's memory taken from a chosen resource and bounded by a window setting.
//
// A compressor owns one zstd compression context laid out in a single workspace allocated from
// its memory_resource when it is built (ZSTD_initStaticCCtx, sized by ZSTD_estimateCCtxSize_*
// for the configured level and window_log). It never allocates again: compress() reuses the
// context, and memory_bytes() reports exactly what it holds, which window_log bounds (a
// smaller window shrinks the match tables; see docs/adapters/zstd.md for sizes). compress()
// appends one complete frame to a byte_buffer the caller passes in — typically one acquired
// from an application-wide buffer_pool — growing it through the buffer's own resource to
// ZSTD_compressBound when needed.
//
// A compressor is used by one thread at a time and is move-only (a moved-from compressor may
// only be destroyed or assigned to). compressor_pool shares contexts between threads: any thread
// may acquire(), each lease is used by its thread, and at most max_idle contexts are kept. The
// resource must outlive every compressor built on it; every lease must be returned before its
// pool is destroyed.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory_resource>
#include <span>

#include "pmrkit/byte_buffer.hpp"

namespace pmrkit::zstd {

struct compressor_options {
  int level = 3;        // zstd levels: negative (fastest) .. 22; 0 means zstd's default (3)
  int window_log = 20;  // largest match distance 2^window_log; allowed 10..27
  bool checksum = false;  // append a 32-bit content checksum to each frame

  friend bool operator==(const compressor_options&, const compressor_options&) = default;
};

class compressor {
 public:
  // Throws std::invalid_argument for a level or window_log out of range (the message gives the
  // range), and what the resource throws.
  explicit compressor(std::pmr::memory_resource* resource = std::pmr::get_default_resource(),
                      compressor_options options = {});
  compressor(compressor&& other) noexcept;
  compressor& operator=(compressor&& other) noexcept;
  compressor(const compressor&) = delete;
  compressor& operator=(const compressor&) = delete;
  ~compressor();

  // Appends a zstd frame holding `source` (its content size recorded in the frame header) to
  // `destination` and returns the frame's size. Throws what destination's resource throws, and
  // pmrkit::zstd::error if zstd fails; on a throw destination is exactly as it was, its
  // capacity and storage (data()) included.
  std::size_t compress(std::span<const std::byte> source, byte_buffer& destination);

  // Bytes of memory this compressor holds from its resource; constant for its lifetime.
  std::size_t memory_bytes() const noexcept;
  const compressor_options& options() const noexcept { return options_; }
  std::pmr::memory_resource* resource() const noexcept { return resource_; }

  // What memory_bytes() would be for these options (the largest context any input size can
  // need). Throws std::invalid_argument like the constructor.
  static std::size_t memory_bound(const compressor_options& options);

 private:
  friend class compressor_pool;
  struct impl;
  // Gives impl_ back to resource_ and leaves the object moved-from (destructor, move-assign).
  void release_context() noexcept;
  std::pmr::memory_resource* resource_;
  compressor_options options_;
  impl* impl_ = nullptr;  // allocated from resource_
};

struct compressor_pool_stats {
  std::uint64_t created = 0;  // contexts built (misses)
  std::uint64_t reused = 0;   // acquires served by a kept context (hits)
  std::uint64_t dropped = 0;  // returned contexts destroyed because max_idle were kept
  std::size_t idle = 0;       // contexts kept now
  std::size_t idle_memory_bytes = 0;
};

class compressor_pool {
 public:
  // A leased compressor; returns to its pool when destroyed. Move-only. A compressor moved out
  // of a lease is the caller's; what the lease then holds (moved-from, or another compressor
  // assigned to it that is not on the pool's resource and options) is destroyed, not kept.
  class lease {
   public:
    lease(lease&& other) noexcept;
    lease& operator=(lease&&) = delete;
    lease(const lease&) = delete;
    lease& operator=(const lease&) = delete;
    ~lease();
    compressor& operator*() noexcept { return compressor_; }
    compressor* operator->() noexcept { return &compressor_; }

   private:
    friend class compressor_pool;
    lease(compressor_pool* pool, compressor&& c) noexcept;
    compressor_pool* pool_;
    compressor compressor_;
  };

  // Contexts are built with `options` on `resource` (which must be thread-safe if the pool is
  // used from several threads). Throws std::invalid_argument like compressor's constructor.
  explicit compressor_pool(std::pmr::memory_resource* resource = std::pmr::get_default_resource(),
                           compressor_options options = {}, std::size_t max_idle = 8);
  ~compressor_pool();
  compressor_pool(const compressor_pool&) = delete;
  compressor_pool& operator=(const compressor_pool&) = delete;

  // A kept context, or a new one. Thread-safe.
  lease acquire();
  // acquire(), compress, give back. Thread-safe.
  std::size_t compress(std::span<const std::byte> source, byte_buffer& destination);
  // Destroys every kept context.
  void trim();

  compressor_pool_stats stats() const;
  const compressor_options& options() const noexcept { return options_; }

 private:
  void give_back(compressor&& c) noexcept;
  struct state;
  std::pmr::memory_resource* resource_;
  compressor_options options_;
  std::size_t max_idle_;
  state* state_;  // allocated from resource_
};

}  // namespace pmrkit::zstd
