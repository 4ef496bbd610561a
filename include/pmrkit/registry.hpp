// pmrkit/registry.hpp — make any memory strategy by name, at startup, and ask what each offers.
//
// A spec is "name" or "name:key=value,key=value" (sizes take K/M/G suffixes). The registry is
// an immutable table: strategies(), describe_strategy() and make_resource() are safe to call
// from any thread. make_resource() returns an owning pointer; `upstream` is borrowed and must
// outlive the resource. install_default_from_env() installs a process-lifetime resource as
// std::pmr's default: the only process-wide setting pmrkit changes, and only on request. (The
// library does keep internal process-lifetime state of its own: mimalloc, loaded once on first
// use of a mimalloc strategy, and the per-thread caches of size_class and buffer_pool, which
// live in thread-local storage until their thread or resource ends, and recording_resource's
// per-thread note of the thread numbers it gave, kept past the thread's exit hook.)
#pragma once

#include <cstddef>
#include <memory>
#include <memory_resource>
#include <string>
#include <string_view>
#include <vector>

namespace pmrkit {

// How an option's value is written and checked.
enum class option_kind {
  size,          // a byte count in [min, max]: "4096", "64K", "1M", "2G"
  power_of_two,  // a size that must also be a power of two
  choice,        // one of `allowed`
};

struct option_info {
  std::string name;
  option_kind kind;
  // The value used when the spec does not give one, written as a spec would write it ("64K").
  std::string default_value;
  // Sizes only: the inclusive range a value must fall in (0 for a choice).
  std::size_t min;
  std::size_t max;
  // Choices only: every accepted value.
  std::vector<std::string> allowed;
  std::string description;  // one line
};

struct strategy_info {
  std::string name;
  std::string summary;
  // True when allocate/deallocate may be called concurrently from any threads, including
  // freeing a block on a thread other than the one that allocated it.
  bool thread_safe;
  // True when the resource takes its memory from `upstream`; false when it goes to the global
  // heap or the OS directly and never calls upstream.
  bool uses_upstream;
  // True when deallocate() makes memory available to later allocations (false for monotonic,
  // which frees only when destroyed).
  bool reuses_memory;
  // True when the resource must be used, and destroyed, on the thread that made it
  // (mimalloc_heap: a mimalloc heap belongs to its thread); a program that hands work to other
  // threads makes such a resource on each of them.
  bool bound_to_thread;
  std::vector<option_info> options;  // in the order the strategy documents them
};

// Every strategy this build offers, in a stable order.
std::vector<strategy_info> strategies();

// The strategy a spec names ("size_class" or "size_class:max_pooled=4K"; option keys and
// values are not checked). Throws std::invalid_argument for an unknown name, listing every
// valid name (looked up before the options are read), or for a malformed option list (an empty
// item, an item without "=", a key given twice).
strategy_info describe_strategy(std::string_view spec);

// Builds the strategy named by `spec`. Pool-like strategies take their memory from upstream.
// Throws std::invalid_argument for an unknown name (the message lists every valid name; the
// name is looked up before the options are read), an unknown option key, or a malformed or
// out-of-range value (the message names the key and what is allowed).
std::unique_ptr<std::pmr::memory_resource> make_resource(
    std::string_view spec, std::pmr::memory_resource* upstream = std::pmr::new_delete_resource());

// Which threads will allocate from the resource install_default_from_env() installs.
enum class default_resource_users {
  // Any thread may: std::pmr's default is process-wide. Strategies that are not thread-safe or
  // are bound to their thread (strategy_info) are refused.
  any_thread,
  // The program allocates from the calling thread only (no container without an explicit
  // resource is ever built or grown on another thread): every strategy is accepted.
  one_thread,
};

// Reads PMRKIT_STRATEGY (a spec; unset, empty or white space means "new_delete"), builds it
// once, installs it with std::pmr::set_default_resource and returns it. The resource lives until
// exit; later calls return the same resource, whatever they pass. Throws std::invalid_argument
// like make_resource() for a bad spec, or for a strategy `users` rules out, and
// std::runtime_error for a strategy whose library cannot be loaded (mimalloc); their messages
// start with "pmrkit: PMRKIT_STRATEGY='<value>': ". A call that throws installs nothing.
std::pmr::memory_resource& install_default_from_env(
    default_resource_users users = default_resource_users::any_thread);

}  // namespace pmrkit
