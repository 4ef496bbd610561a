// libpmrkit_heap_counter.so: counts every heap allocation of the process it is preloaded into
// (LD_PRELOAD=libpmrkit_heap_counter.so[:<allocator>.so]), for pmrkit_bench's allocs/op and B/op.
//
// It interposes malloc, calloc, realloc, the aligned variants and every form of operator new and
// delete, and forwards each call to the next allocator in symbol order (RTLD_NEXT): glibc, or
// the allocator preloaded after it, which then still serves every request. It is a library of
// its own so that the processes whose loops are timed do not load it at all: an interposer costs
// its forwarding call even when it counts nothing (docs/benchmarks.md, "How allocations are
// counted"). pmrkit_bench finds the C API at the bottom of this file with dlsym (heap_counter.hpp).
// Thread-safe: each thread counts in a slot of its own. Counting is off until switched on.
#include "heap_counter_api.h"

#include <dlfcn.h>
#include <pthread.h>

#include <atomic>
#include <cerrno>
#include <cstddef>
#include <cstring>
#include <new>

#include "bootstrap_arena.hpp"
#include "interpose_hooks.hpp"

namespace counter {
namespace {

// Each thread counts into a slot of its own with plain (non-RMW) relaxed stores, so counting
// costs about a nanosecond and never contends; a reader sums the slots. A slot is claimed on a
// thread's first allocation and given back when the thread exits, its counts folded into
// `retired`, so benchmarks that start fresh threads for every run never run out of slots.
// Threads beyond slot_count share one overflow slot with atomic read-modify-writes.
constexpr int slot_count = 128;

struct alignas(64) slot {
  std::atomic<std::uint64_t> allocations{0};
  std::atomic<std::uint64_t> bytes{0};
  std::atomic<bool> taken{false};
};

// Constant-initialised, so usable by the very first malloc of the process.
slot slots[slot_count];
slot overflow;
std::atomic<std::uint64_t> retired_allocations{0};
std::atomic<std::uint64_t> retired_bytes{0};
// initial-exec: a preloaded library's TLS is in the static block, and the default (global-
// dynamic) model would reach it through __tls_get_addr, which may allocate.
[[gnu::tls_model("initial-exec")]] thread_local slot* my_slot = nullptr;

void retire_slot(void* p) {
  auto* s = static_cast<slot*>(p);
  retired_allocations.fetch_add(s->allocations.exchange(0));
  retired_bytes.fetch_add(s->bytes.exchange(0));
  s->taken.store(false, std::memory_order_release);
}

// Created on the first claim rather than at static initialisation: the dynamic loader and
// libstdc++ allocate before our initialisers run. pthread_once and keys below
// PTHREAD_KEY_2NDLEVEL_SIZE never allocate.
pthread_key_t exit_key;
pthread_once_t exit_key_once = PTHREAD_ONCE_INIT;
bool exit_key_ready = false;

slot* claim_slot() noexcept {
  for (slot& s : slots) {
    bool expected = false;
    if (!s.taken.load(std::memory_order_relaxed) &&
        s.taken.compare_exchange_strong(expected, true, std::memory_order_acquire)) {
      pthread_once(&exit_key_once,
                   [] { exit_key_ready = pthread_key_create(&exit_key, retire_slot) == 0; });
      if (!exit_key_ready || pthread_setspecific(exit_key, &s) != 0) {
        s.taken.store(false);
        return &overflow;
      }
      return &s;
    }
  }
  return &overflow;
}

// Relaxed: switched only between passes, with no allocation in flight that must be counted.
std::atomic<bool> counting_on{false};

void count(std::size_t bytes) noexcept {
  if (!counting_on.load(std::memory_order_relaxed)) return;
  slot* s = my_slot;
  if (!s) s = my_slot = claim_slot();
  if (s == &overflow) {
    s->allocations.fetch_add(1, std::memory_order_relaxed);
    s->bytes.fetch_add(bytes, std::memory_order_relaxed);
    return;
  }
  s->allocations.store(s->allocations.load(std::memory_order_relaxed) + 1,
                       std::memory_order_relaxed);
  s->bytes.store(s->bytes.load(std::memory_order_relaxed) + bytes, std::memory_order_relaxed);
}

// The allocator below us: glibc, or whatever LD_PRELOAD put in front of it.
struct next_allocator {
  void* (*malloc)(std::size_t);
  void (*free)(void*);
  void* (*calloc)(std::size_t, std::size_t);
  void* (*realloc)(void*, std::size_t);
  void* (*memalign)(std::size_t, std::size_t);
  int (*posix_memalign)(void**, std::size_t, std::size_t);
};

// dlsym itself may allocate (calloc for its error buffer); those few early requests are served
// from this static arena and never freed.
constinit pmrkit::interpose::bootstrap_arena bootstrap;
std::atomic<bool> resolving{false};

void* bootstrap_allocate(std::size_t bytes) noexcept { return bootstrap.allocate(bytes); }
bool from_bootstrap(const void* p) noexcept { return bootstrap.contains(p); }

template <class Fn>
Fn resolve(const char* name) noexcept {
  return reinterpret_cast<Fn>(dlsym(RTLD_NEXT, name));
}

const next_allocator* next() noexcept {
  static std::atomic<const next_allocator*> ready{nullptr};
  if (const next_allocator* n = ready.load(std::memory_order_acquire)) return n;
  static next_allocator resolved;
  resolving.store(true);
  resolved.malloc = resolve<decltype(resolved.malloc)>("malloc");
  resolved.free = resolve<decltype(resolved.free)>("free");
  resolved.calloc = resolve<decltype(resolved.calloc)>("calloc");
  resolved.realloc = resolve<decltype(resolved.realloc)>("realloc");
  resolved.memalign = resolve<decltype(resolved.memalign)>("memalign");
  resolved.posix_memalign = resolve<decltype(resolved.posix_memalign)>("posix_memalign");
  resolving.store(false);
  ready.store(&resolved, std::memory_order_release);
  return &resolved;
}

void* counted_malloc(std::size_t bytes) noexcept {
  if (resolving.load(std::memory_order_relaxed)) return bootstrap_allocate(bytes);
  count(bytes);
  return next()->malloc(bytes);
}

void* counted_aligned(std::size_t alignment, std::size_t bytes) noexcept {
  count(bytes);
  return next()->memalign(alignment, bytes);
}

void counted_free(void* p) noexcept {
  if (!p || from_bootstrap(p)) return;
  next()->free(p);
}

}  // namespace
}  // namespace counter

extern "C" {

void pmrkit_heap_counter_snapshot(std::uint64_t* allocations, std::uint64_t* bytes) {
  std::uint64_t total_allocations = counter::retired_allocations.load(std::memory_order_relaxed);
  std::uint64_t total_bytes = counter::retired_bytes.load(std::memory_order_relaxed);
  const auto add = [&](const counter::slot& s) {
    total_allocations += s.allocations.load(std::memory_order_relaxed);
    total_bytes += s.bytes.load(std::memory_order_relaxed);
  };
  for (const counter::slot& s : counter::slots) add(s);
  add(counter::overflow);
  *allocations = total_allocations;
  *bytes = total_bytes;
}

void pmrkit_heap_counter_set_counting(int on) {
  counter::counting_on.store(on != 0, std::memory_order_relaxed);
}

void pmrkit_heap_counter_count(std::uint64_t bytes) {
  counter::count(static_cast<std::size_t>(bytes));
}

}  // extern "C"

using counter::counted_aligned;
using counter::counted_free;
using counter::counted_malloc;

extern "C" {

void* malloc(std::size_t bytes) { return counted_malloc(bytes); }
void free(void* p) { counted_free(p); }

void* calloc(std::size_t count, std::size_t size) {
  if (counter::resolving.load(std::memory_order_relaxed)) {
    // the bootstrap arena is zero-initialised static storage and never reused
    return counter::bootstrap_allocate(count * size);
  }
  if (size != 0 && count > SIZE_MAX / size) return nullptr;
  counter::count(count * size);
  return counter::next()->calloc(count, size);
}

void* realloc(void* p, std::size_t bytes) {
  if (p && counter::from_bootstrap(p)) {
    void* moved = counted_malloc(bytes);
    if (moved) std::memcpy(moved, p, bytes);  // bootstrap blocks are tiny and never shrink here
    return moved;
  }
  counter::count(bytes);
  return counter::next()->realloc(p, bytes);
}

void* memalign(std::size_t alignment, std::size_t bytes) {
  return counted_aligned(alignment, bytes);
}
void* aligned_alloc(std::size_t alignment, std::size_t bytes) {
  return counted_aligned(alignment, bytes);
}
int posix_memalign(void** out, std::size_t alignment, std::size_t bytes) {
  void* p = counted_aligned(alignment, bytes);
  if (!p) return ENOMEM;
  *out = p;
  return 0;
}

}  // extern "C"

// operator new and delete in every form come from interpose/operator_new_forms.cpp, through
// these.
void* pmrkit::interpose::allocate(std::size_t bytes) noexcept { return counted_malloc(bytes); }
void* pmrkit::interpose::allocate_aligned(std::size_t alignment, std::size_t bytes) noexcept {
  return counted_aligned(alignment, bytes);
}
void pmrkit::interpose::release(void* p) noexcept { counted_free(p); }
