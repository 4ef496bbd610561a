// pmrkit/aligned_pool_resource.hpp — the standard pool resources, made safe to use.
//
// aligned_pool_resource<Pool> wraps std::pmr::synchronized_pool_resource or
// unsynchronized_pool_resource and mends two libstdc++ 12 defects:
//  - Alignment. The pools pick a block by size alone, so a block can be less aligned than
//    requested (allocate(24, 16) can return an address that is 8 mod 16; GCC bug 118681).
//    Requests aligned beyond alignof(void*) are served from a slightly larger block, with the
//    offset kept just below the returned address.
//  - Upstream failure. When upstream throws while a pool grows its list of chunks, libstdc++
//    swallows the exception; for a pool's first chunk it then reads an empty list and
//    crashes. And at a thread's exit a synchronized pool moves the thread's chunks to its
//    shared pools, growing their lists in a function that cannot throw: a failure there ends
//    the process. The pool's upstream is a shim that, only in those cases, lends the list its
//    storage from a reserve (eight slots inside this object, more from the process heap when
//    they are all lent, each given back when the list grows again or the pool is released),
//    and the wrapper turns the outcome into the std::bad_alloc the caller should have seen. A
//    null block from the pool (the same defect, later chunks) also becomes std::bad_alloc.
// Thread-safety is Pool's: a synchronized pool may be shared between threads, an
// unsynchronized one may not. Upstream is borrowed and must outlive the resource; destroying
// the resource returns every chunk to upstream.
#pragma once

#include <array>
#include <bitset>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <memory_resource>
#include <mutex>
#include <new>
#include <utility>

namespace pmrkit {
namespace detail {

// The upstream a std pool sees: forwards to the real upstream, and can lend small blocks
// from an in-object reserve when the real upstream fails mid-call (see above).
class pool_upstream_shim final : public std::pmr::memory_resource {
 public:
  explicit pool_upstream_shim(std::pmr::memory_resource* upstream) noexcept
      : upstream_(upstream) {}
  ~pool_upstream_shim() override {
    // The pool, destroyed first, has given every lent slot back.
    while (reserve_.next) delete std::exchange(reserve_.next, reserve_.next->next);
  }
  pool_upstream_shim(const pool_upstream_shim&) = delete;
  pool_upstream_shim& operator=(const pool_upstream_shim&) = delete;

  // What happened to upstream during one pool call on this thread.
  struct call {
    bool granted = false;  // upstream already gave a block during this call
    bool lent = false;     // the reserve stood in for a failed upstream
  };
  // Marks the calling thread as inside a pool call for the lifetime of the object.
  class call_scope {
   public:
    explicit call_scope(call& c) noexcept : saved_(current()) { current() = &c; }
    ~call_scope() { current() = saved_; }
    call_scope(const call_scope&) = delete;
    call_scope& operator=(const call_scope&) = delete;

   private:
    call* saved_;
  };

  std::pmr::memory_resource* upstream() const noexcept { return upstream_; }

 private:
  static constexpr std::size_t slot_bytes = 512;  // a chunk list's first storage is 192 bytes
  static constexpr std::size_t slot_count = 8;

  // Slots a failed list growth may borrow. Each pool (one per size class, and per thread in a
  // synchronized pool) holds at most one at a time, until its list grows again: the first eight
  // live in this object, the rest in blocks from the process heap, the last resort when the
  // pool's own upstream has just failed.
  struct reserve_block {
    alignas(std::max_align_t) std::array<std::array<std::byte, slot_bytes>, slot_count> slots{};
    std::bitset<slot_count> lent;
    reserve_block* next = nullptr;

    bool holds(const std::byte* p) const noexcept {
      return p >= slots[0].data() && p < slots[0].data() + sizeof slots;
    }
  };

  static call*& current() noexcept {
    thread_local call* in_call = nullptr;
    return in_call;
  }

  void* do_allocate(std::size_t bytes, std::size_t alignment) override {
    // libstdc++'s pools saturate an unpooled request's size at SIZE_MAX; no object is larger
    // than PTRDIFF_MAX, so such a request never reaches upstream.
    if (bytes > PTRDIFF_MAX) throw std::bad_alloc();
    call* c = current();
    try {
      void* p = upstream_->allocate(bytes, alignment);
      if (c) c->granted = true;
      return p;
    } catch (const std::bad_alloc&) {
      // Only a failure after upstream already granted a block in this call can be the
      // chunk-list growth that libstdc++ mishandles; outside any call of ours, the pool is
      // moving an exiting thread's chunks, where a throw would end the process.
      if ((c && !c->granted) || bytes > slot_bytes || alignment > alignof(std::max_align_t))
        throw;
      void* p = lend();
      if (!p) throw;
      if (c) c->lent = true;
      return p;
    }
  }

  void do_deallocate(void* p, std::size_t bytes, std::size_t alignment) override {
    const auto* b = static_cast<const std::byte*>(p);
    {
      const std::lock_guard guard(reserve_lock_);
      for (reserve_block* block = &reserve_; block; block = block->next) {
        if (block->holds(b)) {
          block->lent.reset(static_cast<std::size_t>(b - block->slots[0].data()) / slot_bytes);
          return;
        }
      }
    }
    upstream_->deallocate(p, bytes, alignment);
  }

  bool do_is_equal(const std::pmr::memory_resource& other) const noexcept override {
    return this == &other;
  }

  void* lend() noexcept {
    const std::lock_guard guard(reserve_lock_);
    reserve_block* last = nullptr;
    for (reserve_block* block = &reserve_; block; block = block->next) {
      for (std::size_t i = 0; i < slot_count; ++i) {
        if (!block->lent.test(i)) {
          block->lent.set(i);
          return block->slots[i].data();
        }
      }
      last = block;
    }
    last->next = new (std::nothrow) reserve_block;
    if (!last->next) return nullptr;
    last->next->lent.set(0);
    return last->next->slots[0].data();
  }

  std::pmr::memory_resource* upstream_;
  std::mutex reserve_lock_;
  reserve_block reserve_;
};

}  // namespace detail

template <class Pool>
class aligned_pool_resource final : public std::pmr::memory_resource {
 public:
  aligned_pool_resource(const std::pmr::pool_options& options,
                        std::pmr::memory_resource* upstream)
      : shim_(upstream), pool_(options, &shim_) {}

  void release() { pool_.release(); }
  std::pmr::memory_resource* upstream_resource() const noexcept { return shim_.upstream(); }
  std::pmr::pool_options options() const { return pool_.options(); }

 private:
  // Every pool block is at least pointer-aligned, which is what the offset slot needs.
  static constexpr std::size_t native_alignment = alignof(void*);

  void* pool_allocate(std::size_t bytes, std::size_t alignment) {
    detail::pool_upstream_shim::call call;
    void* p = nullptr;
    {
      const detail::pool_upstream_shim::call_scope scope(call);
      p = pool_.allocate(bytes, alignment);
    }
    if (call.lent && p) pool_.deallocate(p, bytes, alignment);
    if (call.lent || !p) throw std::bad_alloc();
    return p;
  }

  void* do_allocate(std::size_t bytes, std::size_t alignment) override {
    if (alignment <= native_alignment) return pool_allocate(bytes, alignment);
    // PTRDIFF_MAX: no object is larger, and libstdc++'s aligned new wraps sizes near SIZE_MAX.
    // The alignment first, so that the subtraction cannot wrap.
    if (alignment > PTRDIFF_MAX || bytes > PTRDIFF_MAX - alignment) throw std::bad_alloc();
    // The aligned address q lies in [p + 8, p + alignment], so the offset q - p fits in the
    // slot just below q, inside the block.
    auto* raw = static_cast<std::byte*>(pool_allocate(bytes + alignment, native_alignment));
    const auto addr = reinterpret_cast<std::uintptr_t>(raw) + native_alignment;
    auto* aligned = raw + ((addr + alignment - 1) & ~(alignment - 1)) -
                    reinterpret_cast<std::uintptr_t>(raw);
    const std::size_t offset = static_cast<std::size_t>(aligned - raw);
    std::memcpy(aligned - sizeof offset, &offset, sizeof offset);
    return aligned;
  }

  void do_deallocate(void* p, std::size_t bytes, std::size_t alignment) override {
    if (alignment <= native_alignment) return pool_.deallocate(p, bytes, alignment);
    auto* aligned = static_cast<std::byte*>(p);
    std::size_t offset = 0;
    std::memcpy(&offset, aligned - sizeof offset, sizeof offset);
    pool_.deallocate(aligned - offset, bytes + alignment, native_alignment);
  }

  bool do_is_equal(const std::pmr::memory_resource& other) const noexcept override {
    return this == &other;
  }

  detail::pool_upstream_shim shim_;  // declared first: the pool returns its chunks through it
  Pool pool_;
};

using aligned_sync_pool_resource = aligned_pool_resource<std::pmr::synchronized_pool_resource>;
using aligned_unsync_pool_resource =
    aligned_pool_resource<std::pmr::unsynchronized_pool_resource>;

}  // namespace pmrkit
