// Internal: per-thread caches of a shared object (a resource, a pool). Which caches exist, for
// threads and for their owners, and how a thread's exit and an owner's destruction (or
// release()) meet safely. size_class_engine, buffer_pool and recording_resource keep their
// per-thread caches here: each brings its cache type and what to do with a cache whose thread
// exits.
//
// A cache_link ties one thread's cache to one owner. Both sides hold a reference; the last to
// let go deletes it. `owner` holds the owner's key (its address, or another it chose) while
// the cache serves it and becomes null exactly once, under `detach_mutex`, by whichever comes
// first:
//  - the thread exits: under detach_mutex the owner absorbs the cache (it is alive: it cannot
//    finish detaching this link while the mutex is held);
//  - the owner is destroyed or released: under detach_mutex it marks the link detached, after
//    doing what it must with the cache's contents (or nothing, if they die with it).
// The thread's fast path compares `owner` with the key of the object it is called for, so a
// detached cache is never used again, even by a new owner that reuses the old one's address.
// Lock order: registry mutex, then detach_mutex, then the registry's exit gate, then whatever
// the owner locks inside. A thread's exit absorbs its cache under the exit gate, so a snapshot
// (while_frozen) holds the registry mutex and the gate alone, one lock however many threads
// there are, and sees every cache either attached or already absorbed.
//
// An owner may also take a cache away from a thread that is alive and may be using it at that
// very moment (reclaim(), for size_class's trim() and its idle caches). That works only for
// owners whose thread brackets every use of its cache: a short use that calls nothing (a fast
// path) between begin_fast_use()/end_fast_use(), which set a flag of the thread's own, and
// any other use between begin_use(link)/end_use(link), which set a flag of the link. Plain
// stores, no lock and no read-modify-write. The reclaimer clears `owner`, makes every thread
// of the process execute a full memory barrier (Linux membarrier), and waits for both flags to
// be clear: a use that began before the barrier is seen and waited for; one that begins after
// it sees `owner` cleared and leaves the cache alone. The thread's flag sits in its
// thread-local directory, so setting it is a store to a fixed thread-pointer offset; a fast
// use calls nothing, so the flag never nests.
#pragma once

#include <atomic>
#include <cstdint>
#include <mutex>
#include <new>
#include <thread>
#include <utility>

namespace pmrkit::detail {

struct cache_link {
  virtual ~cache_link() = default;

  // The key the owner's caches are found by: its address, or one it chose (thread_caches'
  // make_keyed). Compared only, never dereferenced.
  std::atomic<const void*> owner{nullptr};
  // Set by the thread during a use of the cache other than a fast one (begin_use/end_use).
  std::atomic<std::uint32_t> in_use{0};
  // The thread's fast-use flag (thread_directory::in_fast_use); null once the thread exits or
  // drops the link from its list. Read by reclaim() under detach_mutex, which the thread takes
  // to clear it.
  const std::atomic<std::uint32_t>* thread_in_fast_use = nullptr;
  std::atomic<int> references{2};  // the thread's directory and the owner's registry
  std::mutex detach_mutex;
  // Called at thread exit, under detach_mutex, while owner is set: the owner takes the cache's
  // contents back.
  void (*absorb_into_owner)(cache_link&) noexcept = nullptr;
  void* absorber = nullptr;  // the owner object absorb_into_owner hands the cache to
  // The owner's exit gate (cache_registry): absorb_into_owner runs under it. Set by the
  // registry; read while owner is set, when the registry is alive.
  std::mutex* exit_gate = nullptr;
  cache_link* next_in_thread = nullptr;    // owned by the thread
  cache_link* next_in_registry = nullptr;  // guarded by the registry's mutex
  cache_link* next_reclaimed = nullptr;    // owned by the reclaim() that took the link
};

void drop_reference(cache_link* link) noexcept;

// What a thread's `last` points to while it has no cache to name: a link no owner ever holds
// (its owner stays null), so the fast paths compare its owner with theirs, fail and take the
// slow path, with no null test before the comparison (two instructions fewer a call, which a
// container's destroy pays for: docs/size_class_containers.md, "What a free costs in a
// destroy"). Never written, never adopted, and never destroyed, so that a thread still running
// while the process exits reads a live object.
struct unowned_link {
  constexpr unowned_link() noexcept : link() {}
  ~unowned_link() {}  // leaves the link alone
  union {
    cache_link link;
  };
};
extern constinit unowned_link no_cache;
constexpr cache_link* no_cache_link() noexcept { return &no_cache.link; }

// Whether this process can make every thread execute a full memory barrier (Linux membarrier,
// private expedited, registered on first call); reclaim() does nothing without it.
bool can_fence_every_thread() noexcept;
// The barrier; false if the kernel refused it.
bool fence_every_thread() noexcept;

// Per thread. Constant-initialized and trivially destructible, so the fast path reads it with
// a plain thread-pointer-relative load; the exit hook lives elsewhere and is armed lazily.
struct thread_directory {
  cache_link* last = no_cache_link();  // the cache used most recently, or no_cache_link()
  cache_link* list = nullptr;  // every cache this thread holds
  bool exited = false;         // exit hook has run: no new caches on this thread
  std::atomic<std::uint32_t> in_fast_use{0};  // see begin_fast_use
};

[[gnu::tls_model("initial-exec")]] extern thread_local constinit thread_directory
    this_thread_caches;

// The thread's side of reclaim() (see the top of this file). A use checks `owner` only after
// it began. The signal fences keep the compiler from moving the cache's accesses out of the
// bracket; the processor's reordering of the flag's store after the load of `owner` is what
// the reclaimer's process-wide barrier settles.
inline void begin_fast_use() noexcept {
  this_thread_caches.in_fast_use.store(1, std::memory_order_relaxed);
  std::atomic_signal_fence(std::memory_order_seq_cst);
}
inline void end_fast_use() noexcept {
  this_thread_caches.in_fast_use.store(0, std::memory_order_release);
}
inline void begin_use(cache_link& link) noexcept {
  link.in_use.store(1, std::memory_order_relaxed);
  std::atomic_signal_fence(std::memory_order_seq_cst);
}
inline void end_use(cache_link& link) noexcept { link.in_use.store(0, std::memory_order_release); }

// The calling thread's cache found by `key`, made `last`; nullptr if it has none. Drops
// detached caches on the way.
cache_link* find_thread_cache(const void* key) noexcept;
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

  // Takes each attached link for which choose(link) is true away from its thread, which may
  // be using it (see the top of this file; the thread must bracket its uses), then calls
  // visit(link) for each once no use is in progress, without any lock held. Returns how many
  // were taken: 0 if the process-wide barrier is not available. The thread drops the link at
  // its next lookup; a thread that exits meanwhile leaves the contents to visit.
  template <class Choose, class Visit>
  std::size_t reclaim(Choose&& choose, Visit&& visit) noexcept {
    if (!can_fence_every_thread()) return 0;
    cache_link* taken = nullptr;
    {
      const std::lock_guard lock(mutex_);
      for (cache_link* link = head_; link; link = link->next_in_registry) {
        const std::lock_guard detach_lock(link->detach_mutex);
        if (!link->owner.load(std::memory_order_acquire) || !choose(*link)) continue;
        link->owner.store(nullptr, std::memory_order_seq_cst);
        link->references.fetch_add(1, std::memory_order_relaxed);  // ours, until visited
        link->next_reclaimed = taken;
        taken = link;
      }
    }
    if (!taken) return 0;
    // Registered, the barrier does not fail (it fails only for a bad command or flags).
    fence_every_thread();
    std::size_t count = 0;
    while (taken) {
      cache_link* const next = taken->next_reclaimed;
      {
        // The thread cannot drop the link or finish exiting (and free its flag) while we hold
        // this; a fast use takes no lock, so it ends while we wait.
        const std::lock_guard detach_lock(taken->detach_mutex);
        if (const auto* fast = taken->thread_in_fast_use)
          while (fast->load(std::memory_order_acquire) != 0) std::this_thread::yield();
      }
      while (taken->in_use.load(std::memory_order_acquire) != 0) std::this_thread::yield();
      visit(*taken);
      drop_reference(taken);
      ++count;
      taken = next;
    }
    return count;
  }

  // Calls visit(link) for each attached link while holding the registry and the exit gate,
  // then after() still under them, so no thread exit runs halfway through. (One lock for every
  // link, rather than each link's detach_mutex: with hundreds of threads, a snapshot would
  // otherwise hold hundreds of locks at once.)
  template <class Visit, class After>
  void while_frozen(Visit&& visit, After&& after) const {
    const std::lock_guard registry_lock(mutex_);
    const std::lock_guard gate(exit_gate_);
    for (cache_link* link = head_; link; link = link->next_in_registry)
      if (link->owner.load(std::memory_order_acquire)) visit(*link);
    after();
  }

 private:
  mutable std::mutex mutex_;
  // Held by a thread's exit while the owner absorbs its cache, and by while_frozen.
  mutable std::mutex exit_gate_;
  cache_link* head_ = nullptr;
};

// An owner's caches of type Cache, one per thread that uses the owner. Owner must have
//   void absorb_exiting_cache(Cache&) noexcept;
// (public, or befriending this class), called on the exiting thread, under the cache's
// detach_mutex, while the owner is alive: it takes back what the cache holds. Caches are
// found by a key, which the caller passes to each call: the owner's address, or (make_keyed)
// the address of an object that lives exactly as long as the owner and is at hand where the
// owner is not (size_class's fast paths compare the resource's address, so that a hit never
// loads the address of the engine behind it).
template <class Owner, class Cache>
class thread_caches {
 public:
  // The calling thread's cache for key if it is the one the thread used last, else nullptr:
  // one thread-local load and one compare (find's first step).
  static Cache* last_used(const void* key) noexcept {
    cache_link* const link = this_thread_caches.last;
    if (link->owner.load(std::memory_order_relaxed) == key) [[likely]]
      return &static_cast<linked*>(link)->cache;
    return nullptr;
  }

  // The calling thread's cache for key, or nullptr if it has none.
  static Cache* find(const void* key) noexcept {
    if (Cache* const cache = last_used(key)) return cache;
    cache_link* const link = find_thread_cache(key);
    return link ? &static_cast<linked*>(link)->cache : nullptr;
  }

  // The calling thread's cache for owner, made from Cache(args...) on first use; nullptr if
  // there can be none (out of memory, or the thread is past its exit hook): the owner then
  // works without a cache.
  template <class... Args>
  Cache* find_or_make(Owner* owner, Args&&... args) noexcept {
    if (Cache* const cache = find(owner)) return cache;
    return make(owner, std::forward<Args>(args)...);
  }

  // A new cache for owner, for a caller that found none (find); nullptr as find_or_make.
  template <class... Args>
  Cache* make(Owner* owner, Args&&... args) noexcept {
    return make_keyed(owner, owner, std::forward<Args>(args)...);
  }

  // The same, found by `key` instead of the owner's address: the address of another object
  // that lives as long as the owner, so that no other live owner has it as its key.
  template <class... Args>
  Cache* make_keyed(const void* key, Owner* owner, Args&&... args) noexcept {
    if (this_thread_caches.exited) return nullptr;
    linked* fresh = nullptr;
    try {
      fresh = new linked(std::forward<Args>(args)...);
    } catch (...) {
      return nullptr;
    }
    fresh->owner.store(key, std::memory_order_relaxed);
    fresh->absorb_into_owner = &absorb;
    fresh->absorber = owner;
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

  // Takes from their threads the caches for which choose(cache) is true, and calls
  // visit(cache) on each (cache_registry::reclaim). Only for owners whose threads bracket
  // every use of their cache (see the top of this file).
  template <class Choose, class Visit>
  std::size_t reclaim(Choose&& choose, Visit&& visit) noexcept {
    return registry_.reclaim(
        [&](cache_link& link) { return choose(static_cast<linked&>(link).cache); },
        [&](cache_link& link) { visit(static_cast<linked&>(link).cache); });
  }

  // The cache of a link this thread holds (the fast path's own lookup, for owners that bracket
  // their uses: they read this_thread_caches.last, begin a use, then compare owner).
  static Cache& cache_of(cache_link* link) noexcept { return static_cast<linked*>(link)->cache; }

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
    static_cast<Owner*>(link.absorber)->absorb_exiting_cache(static_cast<linked&>(link).cache);
  }

  cache_registry registry_;
};

}  // namespace pmrkit::detail
