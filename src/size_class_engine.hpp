// Internal: the engine behind basic_size_class_resource<Policy>.
//
// Three layers: a cache of free lists per class (one per thread and resource under
// sync_policy, found through a thread-local one-entry check; the resource's own under
// unsync_policy); a shared store per class that caches refill from and overflow into in
// batches; upstream, for chunks and for large requests. allocate() and deallocate() below are
// the fast paths; everything they call on a miss lives in size_class_engine.cpp.
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <memory_resource>
#include <type_traits>
#include <unordered_map>

#include "pmrkit/size_class_resource.hpp"
#include "size_class_cache.hpp"
#include "size_class_policy.hpp"
#include "size_class_store.hpp"
#include "size_class_table.hpp"
#include "size_class_thread_directory.hpp"

namespace pmrkit::detail {

template <class Policy>
class size_class_engine {
  using traits = policy_traits<Policy>;
  using counter = typename traits::counter;
  using cache = cache_body<counter>;
  static constexpr bool per_thread_caches = traits::per_thread_caches;

 public:
  // Throws std::invalid_argument for an option out of range or a null upstream.
  size_class_engine(const size_class_options& options, std::pmr::memory_resource* upstream);
  ~size_class_engine();
  size_class_engine(const size_class_engine&) = delete;
  size_class_engine& operator=(const size_class_engine&) = delete;

  void* allocate(std::size_t bytes, std::size_t alignment) {
    const unsigned index = class_for(bytes, alignment);
    if (index == size_classes::none) [[unlikely]]
      return allocate_large(bytes, alignment);
    cache* const local = local_cache();
    if (local == nullptr) [[unlikely]]
      return allocate_uncached(index);
    class_cache<counter>& list = local->classes[index];
    void* const block = list.head;
    if (block == nullptr) [[unlikely]]
      return refill(*local, index);
    list.head = next_of(block);
    list.count.subtract(1);
    list.allocations.add(1);
    local->cached_bytes -= list.block_size;
    return block;
  }

  void deallocate(void* block, std::size_t bytes, std::size_t alignment) noexcept {
    const unsigned index = class_for(bytes, alignment);
    if (index == size_classes::none) [[unlikely]]
      return deallocate_large(block, bytes, alignment);
    cache* const local = local_cache();
    if (local == nullptr) [[unlikely]]
      return deallocate_uncached(block, index);
    class_cache<counter>& list = local->classes[index];
    set_next(block, list.head);
    list.head = block;
    list.count.add(1);
    list.deallocations.add(1);
    local->cached_bytes += list.block_size;
    if (list.count.get() > list.limit || local->cached_bytes > local->budget) [[unlikely]]
      overflow(*local, index);
  }

  void release() noexcept;
  size_class_stats stats() const;
  const size_class_options& options() const noexcept { return options_; }
  std::pmr::memory_resource* upstream() const noexcept { return upstream_; }

 private:
  // Requests of at most this many bytes (and alignment at most 16) find their class in one
  // table load; 4096 covers the sizes most programs allocate most often.
  static constexpr std::size_t table_limit = 4096;

  unsigned class_for(std::size_t bytes, std::size_t alignment) const noexcept {
    const std::size_t size = bytes > alignment ? bytes : alignment;
    // Every class from 16 bytes up is a multiple of 16, so 16-byte alignment is free.
    if (size <= table_limit && alignment <= 16) [[likely]]
      return small_classes_[(size + 7) >> 3];
    return class_for_other(bytes, alignment);
  }
  unsigned class_for_other(std::size_t bytes, std::size_t alignment) const noexcept;

  cache* local_cache() noexcept {
    if constexpr (per_thread_caches) {
      cache_link* const link = this_thread_caches.last;
      if (link != nullptr && link->owner.load(std::memory_order_relaxed) == this) [[likely]]
        return &static_cast<thread_cache<counter>*>(link)->body;
      return attach_thread_cache();
    } else {
      return &own_cache_;
    }
  }

  // Slow paths (size_class_engine.cpp).
  cache* attach_thread_cache() noexcept;
  static void give_back_thread_cache(cache_link& link) noexcept;
  void init_cache(cache& local) const noexcept;
  void* refill(cache& local, unsigned index);
  void overflow(cache& local, unsigned index) noexcept;
  void flush(cache& local, unsigned index, std::uint32_t count) noexcept;
  void give_back_everything(cache& local) noexcept;
  void* allocate_uncached(unsigned index);
  void deallocate_uncached(void* block, unsigned index) noexcept;
  block_list take(unsigned index, std::uint32_t wanted, std::uint64_t allocations);
  void give(unsigned index, void* blocks, std::uint32_t count, std::uint64_t allocations,
            std::uint64_t deallocations) noexcept;
  chunk_header* new_chunk(unsigned index);
  void free_chunks(chunk_header* chain, std::size_t chunk_bytes) noexcept;
  void* allocate_large(std::size_t bytes, std::size_t alignment);
  void deallocate_large(void* block, std::size_t bytes, std::size_t alignment) noexcept;

  struct nothing {};
  struct large_block {
    std::size_t bytes;
    std::size_t alignment;
  };
  using shared_counter = typename traits::shared_counter;

  // Read on every call; written only by the constructor (and, unsync, own_cache_).
  std::pmr::memory_resource* const upstream_;
  const size_class_options options_;
  unsigned class_count_ = 0;
  std::array<std::uint8_t, table_limit / 8 + 1> small_classes_{};
  std::array<class_info, size_classes::count> info_{};
  [[no_unique_address]] std::conditional_t<per_thread_caches, nothing, cache> own_cache_{};

  // Touched in batches, each store on its own cache lines.
  std::array<class_store<Policy>, size_classes::count> stores_{};
  [[no_unique_address]] std::conditional_t<per_thread_caches, cache_registry, nothing>
      registry_{};

  mutable typename traits::mutex large_mutex_;
  std::unordered_map<void*, large_block> large_blocks_;  // guarded by large_mutex_
  std::uint64_t large_allocations_ = 0;                  // guarded by large_mutex_
  std::uint64_t large_deallocations_ = 0;                // guarded by large_mutex_

  alignas(64) shared_counter bytes_from_upstream_;
  shared_counter peak_bytes_from_upstream_;
  shared_counter empty_chunk_bytes_;
};

}  // namespace pmrkit::detail
