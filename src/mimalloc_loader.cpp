#include "mimalloc_loader.hpp"

#include <dlfcn.h>

#include <stdexcept>
#include <string>

namespace pmrkit::detail {
namespace {

constexpr const char* library_name = "libmimalloc.so.2";

template <class Fn>
Fn lookup(void* library, const char* symbol) {
  void* address = dlsym(library, symbol);
  if (!address)
    throw std::runtime_error(std::string("pmrkit: ") + library_name + " has no symbol " +
                             symbol + "; a mimalloc 2.x library is required");
  return reinterpret_cast<Fn>(address);
}

mimalloc_api load() {
  // RTLD_LOCAL: mimalloc's malloc/free/operator new do not join the global symbol scope, so
  // the process allocator stays glibc's. The handle is never closed: blocks from mimalloc may
  // be freed until exit.
  void* library = dlopen(library_name, RTLD_NOW | RTLD_LOCAL);
  if (!library)
    throw std::runtime_error(std::string("pmrkit: cannot load ") + library_name +
                             " for the mimalloc strategies (" + dlerror() +
                             "); install Debian's libmimalloc2.0 package");
  mimalloc_api api{};
  api.malloc = lookup<decltype(api.malloc)>(library, "mi_malloc");
  api.malloc_aligned = lookup<decltype(api.malloc_aligned)>(library, "mi_malloc_aligned");
  api.heap_new = lookup<decltype(api.heap_new)>(library, "mi_heap_new");
  api.heap_destroy = lookup<decltype(api.heap_destroy)>(library, "mi_heap_destroy");
  api.heap_malloc = lookup<decltype(api.heap_malloc)>(library, "mi_heap_malloc");
  api.heap_malloc_aligned =
      lookup<decltype(api.heap_malloc_aligned)>(library, "mi_heap_malloc_aligned");
  api.free = lookup<decltype(api.free)>(library, "mi_free");
  api.process_info = lookup<decltype(api.process_info)>(library, "mi_process_info");
  api.stats_reset = lookup<decltype(api.stats_reset)>(library, "mi_stats_reset");
  return api;
}

}  // namespace

const mimalloc_api& mimalloc() {
  static const mimalloc_api api = load();
  return api;
}

}  // namespace pmrkit::detail
