#include "pmrkit/registry.hpp"

#include <cstdlib>
#include <stdexcept>

#include "factories.hpp"
#include "strategy_table.hpp"

namespace pmrkit {
namespace detail {
namespace {

constexpr strategy_entry table[] = {
    {"new_delete",
     "std::pmr::new_delete_resource(): every allocation goes to the global heap; the no-reuse "
     "baseline",
     true, false, true, make_new_delete},
    {"std_sync_pool",
     "std::pmr::synchronized_pool_resource over upstream (alignment-corrected); thread-safe "
     "behind one lock per pool",
     true, true, true, make_std_sync_pool},
    {"std_unsync_pool",
     "std::pmr::unsynchronized_pool_resource over upstream (alignment-corrected); "
     "single-threaded",
     false, true, true, make_std_unsync_pool},
    {"monotonic",
     "std::pmr::monotonic_buffer_resource over upstream; single-threaded; deallocate is a no-op "
     "by design, memory returns only when the resource is destroyed",
     false, true, false, make_monotonic},
    {"boost_pool",
     "one boost::pool per power-of-two size class, chunks from upstream; larger blocks go "
     "straight to upstream; single-threaded",
     false, true, true, make_boost_pool},
    {"mimalloc",
     "mimalloc's mi_malloc_aligned/mi_free_size_aligned (library loaded privately, the process "
     "allocator is untouched); thread-safe; ignores upstream",
     true, false, true, make_mimalloc},
    {"mimalloc_heap",
     "a private mimalloc heap, freed all at once when the resource is destroyed; "
     "single-threaded (use it on the thread that created it); ignores upstream",
     false, false, true, make_mimalloc_heap},
    {"size_class",
     "pmrkit's size-class pool: ~45 classes up to max_pooled, per-thread caches (no lock on the "
     "common path), chunks from upstream returned once empty beyond max_retained; thread-safe",
     true, true, true, make_size_class},
    {"size_class_unsync",
     "size_class's engine with a single-threaded policy: one cache, no locks, no atomics; "
     "single-threaded",
     false, true, true, make_size_class_unsync},
    {"checked",
     "wraps upstream and checks every use: double or foreign frees, wrong size or alignment, "
     "overruns (guard bytes), writes after free (poisoned quarantine), blocks live at "
     "destruction; on_error=abort|throw; thread-safe (one mutex); for tests and debugging",
     true, true, true, make_checked},
};

std::string valid_names() {
  std::string names;
  for (const auto& e : table) names += (names.empty() ? "" : ", ") + std::string(e.name);
  return names;
}

}  // namespace

std::span<const strategy_entry> strategy_table() { return table; }

const strategy_entry* find_strategy(std::string_view name) {
  for (const auto& e : table)
    if (name == e.name) return &e;
  return nullptr;
}

}  // namespace detail

std::vector<strategy_info> strategies() {
  std::vector<strategy_info> out;
  for (const auto& e : detail::strategy_table()) out.push_back({e.name, e.summary, e.thread_safe});
  return out;
}

std::unique_ptr<std::pmr::memory_resource> make_resource(std::string_view spec,
                                                         std::pmr::memory_resource* upstream) {
  detail::parsed_spec parsed = detail::parse_spec(spec);
  const detail::strategy_entry* entry = detail::find_strategy(parsed.name);
  if (!entry)
    throw std::invalid_argument("pmrkit: unknown strategy '" + parsed.name +
                                "'; valid strategies are: " + detail::valid_names());
  if (!upstream)
    throw std::invalid_argument("pmrkit: make_resource(\"" + std::string(spec) +
                                "\") was given a null upstream resource");
  detail::option_reader options(parsed.name, std::move(parsed.options));
  auto resource = entry->make(options, upstream);
  options.finish();
  return resource;
}

std::pmr::memory_resource& install_default_from_env() {
  // A function-local static: built once even when called from several threads, destroyed
  // never (it may still be in use by other statics' destructors at exit).
  static std::pmr::memory_resource* const installed = [] {
    const char* env = std::getenv("PMRKIT_STRATEGY");
    const std::string_view spec = (env && *env) ? env : "new_delete";
    std::pmr::memory_resource* r = make_resource(spec).release();
    std::pmr::set_default_resource(r);
    return r;
  }();
  return *installed;
}

}  // namespace pmrkit
