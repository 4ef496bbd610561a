#include "thread_cache_directory.hpp"

#include <linux/membarrier.h>
#include <sys/syscall.h>
#include <unistd.h>

namespace pmrkit::detail {

constinit unowned_link no_cache;
[[gnu::tls_model("initial-exec")]] thread_local constinit thread_directory this_thread_caches{};

namespace {

void run_exit_hook() noexcept {
  thread_directory& directory = this_thread_caches;
  directory.exited = true;
  directory.last = no_cache_link();
  cache_link* link = directory.list;
  directory.list = nullptr;
  while (link) {
    cache_link* const next = link->next_in_thread;
    {
      const std::lock_guard lock(link->detach_mutex);
      if (link->owner.load(std::memory_order_acquire)) {
        // Under the gate, a snapshot of the owner sees the cache or what it gave back, not
        // both and not neither.
        const std::lock_guard gate(*link->exit_gate);
        link->absorb_into_owner(*link);
        link->owner.store(nullptr, std::memory_order_release);
      }
      link->thread_in_fast_use = nullptr;  // this thread's storage is about to go
    }
    drop_reference(link);
    link = next;
  }
}

// Its destructor is the thread's exit hook. Only threads that made a cache arm it, so other
// threads pay nothing at exit; the fast path never touches it (it is not trivially
// destructible, so reaching it goes through the TLS initialisation guard).
struct exit_hook {
  bool armed = false;
  ~exit_hook() {
    if (armed) run_exit_hook();
  }
};
thread_local exit_hook this_thread_exit_hook;

}  // namespace

bool can_fence_every_thread() noexcept {
  // Registration is per process and once is enough; a kernel older than 4.14 or a seccomp
  // filter refuses it, and reclaim() then leaves other threads' caches alone.
  static const bool registered =
      syscall(SYS_membarrier, MEMBARRIER_CMD_REGISTER_PRIVATE_EXPEDITED, 0, 0) == 0;
  return registered;
}

bool fence_every_thread() noexcept {
  return can_fence_every_thread() &&
         syscall(SYS_membarrier, MEMBARRIER_CMD_PRIVATE_EXPEDITED, 0, 0) == 0;
}

void drop_reference(cache_link* link) noexcept {
  if (link->references.fetch_sub(1, std::memory_order_acq_rel) == 1) delete link;
}

cache_link* find_thread_cache(const void* key) noexcept {
  thread_directory& directory = this_thread_caches;
  cache_link* found = nullptr;
  cache_link** slot = &directory.list;
  while (cache_link* link = *slot) {
    const void* link_owner = link->owner.load(std::memory_order_acquire);
    if (link_owner == nullptr) {  // its resource was destroyed or released, or reclaim() took it
      *slot = link->next_in_thread;
      if (directory.last == link) directory.last = no_cache_link();
      {
        // A reclaim() that took the link may still read this thread's flag through it; once
        // the link is out of the thread's list, the exit hook no longer clears the pointer.
        const std::lock_guard lock(link->detach_mutex);
        link->thread_in_fast_use = nullptr;
      }
      drop_reference(link);
      continue;
    }
    if (link_owner == key) found = link;
    slot = &link->next_in_thread;
  }
  if (found) directory.last = found;
  return found;
}

bool adopt_thread_cache(cache_link* link) noexcept {
  thread_directory& directory = this_thread_caches;
  if (directory.exited) return false;
  this_thread_exit_hook.armed = true;
  link->thread_in_fast_use = &directory.in_fast_use;
  link->next_in_thread = directory.list;
  directory.list = link;
  directory.last = link;
  return true;
}

void cache_registry::add(cache_link* link) noexcept {
  const std::lock_guard lock(mutex_);
  cache_link** slot = &head_;
  while (cache_link* existing = *slot) {
    if (existing->owner.load(std::memory_order_acquire) == nullptr) {  // its thread exited
      *slot = existing->next_in_registry;
      drop_reference(existing);
      continue;
    }
    slot = &existing->next_in_registry;
  }
  link->exit_gate = &exit_gate_;
  link->next_in_registry = head_;
  head_ = link;
}

}  // namespace pmrkit::detail
