#include "heap_counter.hpp"

#include <dlfcn.h>

#include "heap_counter_api.h"

namespace pmrkit::bench {
namespace {

struct counter_api {
  decltype(&pmrkit_heap_counter_snapshot) snapshot = nullptr;
  decltype(&pmrkit_heap_counter_set_counting) set_counting = nullptr;
  decltype(&pmrkit_heap_counter_count) count = nullptr;
};

template <class Fn>
Fn find(const char* name) noexcept {
  return reinterpret_cast<Fn>(dlsym(RTLD_DEFAULT, name));
}

// Looked up once: the library is either preloaded from the start or absent for good.
const counter_api* api() noexcept {
  static const counter_api found = [] {
    counter_api a;
    a.snapshot = find<decltype(a.snapshot)>("pmrkit_heap_counter_snapshot");
    a.set_counting = find<decltype(a.set_counting)>("pmrkit_heap_counter_set_counting");
    a.count = find<decltype(a.count)>("pmrkit_heap_counter_count");
    return a;
  }();
  return found.snapshot && found.set_counting && found.count ? &found : nullptr;
}

}  // namespace

bool heap_counter_present() noexcept { return api() != nullptr; }

void set_heap_counting(bool on) noexcept {
  if (const counter_api* a = api()) a->set_counting(on ? 1 : 0);
}

heap_snapshot heap_allocations() noexcept {
  heap_snapshot s;
  if (const counter_api* a = api()) a->snapshot(&s.allocations, &s.bytes);
  return s;
}

void count_heap_allocation(std::uint64_t bytes) noexcept {
  if (const counter_api* a = api()) a->count(bytes);
}

}  // namespace pmrkit::bench
