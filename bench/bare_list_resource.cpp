#include "bare_list_resource.hpp"

#include <algorithm>
#include <atomic>
#include <cstddef>
#include <mutex>
#include <new>
#include <vector>

namespace pmrkit::bench {
namespace {

constexpr std::size_t granule = 16;
constexpr std::size_t largest = 4096;
constexpr std::size_t slab_bytes = 1 << 20;

struct free_block {
  free_block* next;
};

// Slabs outlive the thread that carved them (its blocks may sit in another thread's list), so
// they are kept process-wide and returned at exit.
struct slab_store {
  std::mutex lock;
  std::vector<void*> slabs;
  std::atomic<std::size_t> slab_count{0};
  ~slab_store() {
    for (void* s : slabs) ::operator delete(s, std::align_val_t{granule});
  }
  void* take() {
    void* slab = ::operator new(slab_bytes, std::align_val_t{granule});
    const std::lock_guard guard(lock);
    slabs.push_back(slab);
    slab_count.store(slabs.size(), std::memory_order_relaxed);
    return slab;
  }
};
slab_store store;
std::atomic<std::size_t> large_bytes_in_use{0};  // relaxed: a statistic, off the list path
std::atomic<std::size_t> peak_held{0};

// After a slab or a large block is taken: off the list path, as the counters above.
void raise_peak_held() noexcept {
  const std::size_t now = bare_list_resource::held_bytes();
  std::size_t peak = peak_held.load(std::memory_order_relaxed);
  while (now > peak &&
         !peak_held.compare_exchange_weak(peak, now, std::memory_order_relaxed)) {
  }
}

struct thread_lists {
  free_block* heads[largest / granule + 1] = {};
  std::byte* bump = nullptr;
  std::byte* bump_end = nullptr;

  void* carve(std::size_t rounded) {
    if (static_cast<std::size_t>(bump_end - bump) < rounded) {
      void* slab = store.take();
      raise_peak_held();
      bump = static_cast<std::byte*>(slab);
      bump_end = bump + slab_bytes;
    }
    void* p = bump;
    bump += rounded;
    return p;
  }
};

thread_local thread_lists lists;

}  // namespace

std::size_t bare_list_resource::held_bytes() noexcept {
  return store.slab_count.load(std::memory_order_relaxed) * slab_bytes +
         large_bytes_in_use.load(std::memory_order_relaxed);
}

std::size_t bare_list_resource::peak_held_bytes() noexcept {
  return std::max(peak_held.load(std::memory_order_relaxed), held_bytes());
}

void* bare_list_resource::do_allocate(std::size_t bytes, std::size_t alignment) {
  if (bytes > largest || alignment > granule) {
    void* p = ::operator new(bytes, std::align_val_t{alignment});
    large_bytes_in_use.fetch_add(bytes, std::memory_order_relaxed);
    raise_peak_held();
    return p;
  }
  const std::size_t index = (bytes + granule - 1) / granule;
  if (free_block* b = lists.heads[index]) {
    lists.heads[index] = b->next;
    return b;
  }
  return lists.carve(index == 0 ? granule : index * granule);
}

void bare_list_resource::do_deallocate(void* p, std::size_t bytes, std::size_t alignment) {
  if (bytes > largest || alignment > granule) {
    large_bytes_in_use.fetch_sub(bytes, std::memory_order_relaxed);
    return ::operator delete(p, std::align_val_t{alignment});
  }
  const std::size_t index = (bytes + granule - 1) / granule;
  auto* b = static_cast<free_block*>(p);
  b->next = lists.heads[index];
  lists.heads[index] = b;
}

}  // namespace pmrkit::bench
