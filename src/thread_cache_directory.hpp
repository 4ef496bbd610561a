// Internal: per-thread caches of a shared object (a resource, a pool). Which caches exist, for
// threads and for their owners, and how a thread's exit and an owner's destruction (or
// release()) meet safely. size_class_engine and buffer_pool both keep their per-thread caches
// here: each brings its cache type and what to do with a cache whose thread exits.
//
// A cache_link ties one thread's cache to one owner. Both sides hold a reference; the last to
// let go deletes it. `owner` points at the owner while the cache serves it and becomes null
// exactly once, under `detach_mutex`, by whichever comes first:
//  - the thread exits: under detach_mutex the owner absorbs the cache (it is alive: it cannot
//    finish detaching this link while the mutex is held);
//  - the owner is destroyed or released: under detach_mutex it marks the link detached, after
//    doing what it must with the cache's contents (or nothing, if they die with it).
// The thread's fast path compares `owner` with the object it is called for, so a detached
// cache is never used again, even by a new owner that reuses the old one's address.
// Lock order: registry mutex, then detach_mutex, then whatever the owner locks inside.
#pragma once

#include <atomic>
#include <mutex>
#include <new>
#include <utility>
#include <vector>

namespace pmrkit::detail {

struct cache_link {
  virtual ~cache_link() = default;

  std::atomic<const void*> owner{nullptr};
  std::atomic<int> references{2};  // the thread's directory and the owner's registry
  std::mutex detach_mutex;
  // Called at thread exit, under detach_mutex, while owner is set: the owner takes the cache's
  // contents back.
  void (*absorb_into_owner)(cache_link&) noexcept = nullptr;
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

// An owner's list of caches, whatever their type.
class cache_registry {
 public:
  cache_registry() = default;
  cache_registry(const cache_registry&) = delete;
  cache_registry& operator=(const cache_registry&) = delete;
  ~cache_registry() { detach_all([](cache_link&) noexcept {}); }

  // Registers a new, attached link (dropping links their threads have detached).
  void add(cache_link* link) noexcept;

  // Detaches every link: their threads will never use them for this owner again. Calls
  // before_detach(link) for each attached link first, under its detach_mutex.
  template <class Visit>
  void detach_all(Visit&& before_detach) noexcept {
    const std::lock_guard lock(mutex_);
    cache_link* link = head_;
    head_ = nullptr;
    while (link) {
      cache_link* const next = link->next_in_registry;
      {
        const std::lock_guard detach_lock(link->detach_mutex);
        if (link->owner.load(std::memory_order_acquire)) before_detach(*link);
        link->owner.store(nullptr, std::memory_order_release);
      }
      drop_reference(link);
      link = next;
    }
  }

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

// An owner's caches of type Cache, one per thread that uses the owner. Owner must have
//   void absorb_exiting_cache(Cache&) noexcept;
// (public, or befriending this class), called on the exiting thread, under the cache's
// detach_mutex, while the owner is alive: it takes back what the cache holds. Caches are
// found by the owner's address, which the caller passes to each call.
template <class Owner, class Cache>
class thread_caches {
 public:
  // The fast path: the calling thread's cache for owner if it is the one the thread used
  // last, else nullptr. One thread-local load and one compare, inlined into the caller.
  static Cache* last_used(const Owner* owner) noexcept {
    cache_link* const link = this_thread_caches.last;
    if (link != nullptr && link->owner.load(std::memory_order_relaxed) == owner) [[likely]]
      return &static_cast<linked*>(link)->cache;
    return nullptr;
  }

  // The calling thread's cache for owner, or nullptr if it has none.
  static Cache* find(const Owner* owner) noexcept {
    if (Cache* const cache = last_used(owner)) return cache;
    cache_link* const link = find_thread_cache(owner);
    return link ? &static_cast<linked*>(link)->cache : nullptr;
  }

  // The calling thread's cache for owner, made from Cache(args...) on first use; nullptr if
  // there can be none (out of memory, or the thread is past its exit hook): the owner then
  // works without a cache.
  template <class... Args>
  Cache* find_or_make(Owner* owner, Args&&... args) noexcept {
    if (Cache* const cache = find(owner)) return cache;
    if (this_thread_caches.exited) return nullptr;
    linked* fresh = nullptr;
    try {
      fresh = new linked(std::forward<Args>(args)...);
    } catch (...) {
      return nullptr;
    }
    fresh->owner.store(owner, std::memory_order_relaxed);
    fresh->absorb_into_owner = &absorb;
    if (!adopt_thread_cache(fresh)) {
      delete fresh;
      return nullptr;
    }
    registry_.add(fresh);
    return &fresh->cache;
  }

  // Detaches every thread's cache from the owner; their threads drop them later.
  void detach_all() noexcept {
    registry_.detach_all([](cache_link&) noexcept {});
  }
  // The same, calling before_detach(cache) first for each cache still attached, under its
  // detach_mutex (its thread cannot be exiting meanwhile).
  template <class Visit>
  void detach_all(Visit&& before_detach) noexcept {
    registry_.detach_all(
        [&](cache_link& link) { before_detach(static_cast<linked&>(link).cache); });
  }

  // Calls visit(cache) for each attached cache, then after(), with no thread exit halfway
  // through: a cache is either visited or already absorbed by its owner.
  template <class Visit, class After>
  void while_frozen(Visit&& visit, After&& after) const {
    registry_.while_frozen(
        [&](const cache_link& link) { visit(static_cast<const linked&>(link).cache); }, after);
  }

 private:
  struct linked final : cache_link {
    template <class... Args>
    explicit linked(Args&&... args) : cache(std::forward<Args>(args)...) {}
    Cache cache;
  };

  static void absorb(cache_link& link) noexcept {
    auto* const owner =
        static_cast<Owner*>(const_cast<void*>(link.owner.load(std::memory_order_acquire)));
    owner->absorb_exiting_cache(static_cast<linked&>(link).cache);
  }

  cache_registry registry_;
};

}  // namespace pmrkit::detail
