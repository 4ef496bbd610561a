// Internal: which thread caches exist, for threads and for resources, and how a thread's exit
// and a resource's destruction (or release()) meet safely.
//
// A cache_link ties one thread's cache to one resource. Both sides hold a reference; the last
// to let go deletes it. `owner` points at the resource's engine while the cache serves it and
// becomes null exactly once, under `detach_mutex`, by whichever comes first:
//  - the thread exits: under detach_mutex it gives its blocks back to the resource (which is
//    alive: the resource cannot finish detaching this link while the mutex is held);
//  - the resource is destroyed or released: under detach_mutex it marks the link detached and
//    never looks at its blocks (they lie in chunks it is about to free).
// The thread's fast path compares `owner` with the engine it is called for, so a detached
// cache is never used again, even by a new resource that reuses the old one's address.
// Lock order: registry mutex, then detach_mutex, then class-store mutexes.
#pragma once

#include <atomic>
#include <mutex>
#include <vector>

namespace pmrkit::detail {

struct cache_link {
  virtual ~cache_link() = default;

  std::atomic<const void*> owner{nullptr};
  std::atomic<int> references{2};  // the thread's directory and the resource's registry
  std::mutex detach_mutex;
  // Called at thread exit, under detach_mutex, while owner is set: give every block back.
  void (*give_back_to_owner)(cache_link&) noexcept = nullptr;
  cache_link* next_in_thread = nullptr;    // owned by the thread
  cache_link* next_in_registry = nullptr;  // guarded by the registry's mutex
};

void drop_reference(cache_link* link) noexcept;

// Per thread. Constant-initialized and trivially destructible, so the fast path reads it with
// a plain thread-pointer-relative load; the exit hook lives elsewhere and is armed lazily.
struct thread_directory {
  cache_link* last = nullptr;  // the cache used most recently
  cache_link* list = nullptr;  // every cache this thread holds
  bool exited = false;         // exit hook has run: no new caches on this thread
};

[[gnu::tls_model("initial-exec")]] extern thread_local constinit thread_directory
    this_thread_caches;

// The calling thread's cache for `owner`, made `last`; nullptr if it has none. Drops detached
// caches on the way.
cache_link* find_thread_cache(const void* owner) noexcept;
// Adds a new cache to the calling thread (arming its exit hook) and makes it `last`. Returns
// false, adding nothing, once the thread's exit hook has run.
bool adopt_thread_cache(cache_link* link) noexcept;

// A resource's list of caches.
class cache_registry {
 public:
  cache_registry() = default;
  cache_registry(const cache_registry&) = delete;
  cache_registry& operator=(const cache_registry&) = delete;
  ~cache_registry() { detach_all(); }

  // Registers a new, attached link (dropping links their threads have detached).
  void add(cache_link* link) noexcept;
  // Detaches every link: their threads will never use them for this resource again.
  void detach_all() noexcept;

  // Calls visit(link) for each attached link while holding the registry and every link's
  // detach_mutex, then after() still under them, so no thread exit runs halfway through.
  template <class Visit, class After>
  void while_frozen(Visit&& visit, After&& after) const {
    const std::lock_guard registry_lock(mutex_);
    std::vector<std::unique_lock<std::mutex>> detach_locks;
    for (cache_link* link = head_; link; link = link->next_in_registry) {
      detach_locks.emplace_back(link->detach_mutex);
      if (link->owner.load(std::memory_order_acquire)) visit(*link);
    }
    after();
  }

 private:
  mutable std::mutex mutex_;
  cache_link* head_ = nullptr;
};

}  // namespace pmrkit::detail
