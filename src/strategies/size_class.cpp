// Strategies "size_class" and "size_class_unsync": pmrkit's own pool, one engine with a
// thread-safe and a single-threaded policy (size_class_resource; docs/size_class.md).
#include <limits>

#include "pmrkit/size_class_resource.hpp"
#include "strategy.hpp"

namespace pmrkit::detail::strategies {
namespace {

constexpr size_class_options defaults{};
constexpr std::string_view on_off[] = {"off", "on"};  // false, true

constexpr option_definition option_table[] = {
    power_of_two_option("max_pooled", defaults.max_pooled, 8, std::size_t{1} << 20,
                        "largest pooled request; larger ones go straight to upstream"),
    power_of_two_option("chunk_size", defaults.chunk_size, 4096, std::size_t{256} << 20,
                        "bytes a class takes from upstream at once"),
    size_option("max_retained", defaults.max_retained, 0,
                std::numeric_limits<std::size_t>::max(),
                "bytes kept in wholly free chunks; beyond it chunks go back to upstream"),
    size_option("idle_retained", defaults.idle_retained, 0,
                std::numeric_limits<std::size_t>::max(),
                "bytes of wholly free chunks kept once every thread's cache was taken back as "
                "idle"),
    size_option("thread_cache", defaults.thread_cache, 0, std::size_t{1} << 30,
                "free bytes one thread may cache per resource (0: no caches)"),
    size_option("max_cached_total", defaults.max_cached_total, 0,
                std::numeric_limits<std::size_t>::max(),
                "free bytes all threads' caches may hold together (each may always have 16K)"),
    size_option("cache_idle_us", static_cast<std::size_t>(defaults.cache_idle_time.count()), 0,
                std::size_t{600} * 1000 * 1000,
                "microseconds without an allocation or slow path after which a thread's cache "
                "is taken back (0: never)"),
    choice_option("sweeper_thread", on_off[defaults.sweeper_thread ? 1 : 0], on_off,
                  "a thread of the resource's own sweeps for idle caches once two threads "
                  "share it"),
};

size_class_options read_options(option_reader& options) {
  size_class_options o;
  o.max_pooled = options.size("max_pooled");
  o.chunk_size = options.size("chunk_size");
  o.max_retained = options.size("max_retained");
  o.idle_retained = options.size("idle_retained");
  o.thread_cache = options.size("thread_cache");
  o.max_cached_total = options.size("max_cached_total");
  o.cache_idle_time = std::chrono::microseconds(options.size("cache_idle_us"));
  o.sweeper_thread = options.choice("sweeper_thread") == on_off[1];
  return o;
}

resource_ptr make_sync(option_reader& options, std::pmr::memory_resource* upstream) {
  return std::make_unique<size_class_resource>(read_options(options), upstream);
}

resource_ptr make_unsync(option_reader& options, std::pmr::memory_resource* upstream) {
  return std::make_unique<size_class_unsync_resource>(read_options(options), upstream);
}

}  // namespace

extern const strategy_definition size_class{
    .name = "size_class",
    .summary = "pmrkit's size-class pool: ~66 classes up to max_pooled, per-thread caches (no "
               "lock on the common path), chunks from upstream returned once empty beyond "
               "max_retained; thread-safe",
    .can = {.thread_safe = true, .uses_upstream = true, .reuses_memory = true},
    .options = option_table,
    .make = make_sync,
};

extern const strategy_definition size_class_unsync{
    .name = "size_class_unsync",
    .summary = "size_class's engine with a single-threaded policy: one cache, no locks, no "
               "atomics; single-threaded",
    .can = {.thread_safe = false, .uses_upstream = true, .reuses_memory = true},
    .options = option_table,
    .make = make_unsync,
};

}  // namespace pmrkit::detail::strategies
