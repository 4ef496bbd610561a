// pmrkit/registry.hpp — make any memory strategy by name, at startup.
//
// A spec is "name" or "name:key=value,key=value" (sizes take K/M/G suffixes). The registry is
// an immutable table: strategies() and make_resource() are safe to call from any thread.
// make_resource() returns an owning pointer; `upstream` is borrowed and must outlive the
// resource. install_default_from_env() installs a process-lifetime resource as
// std::pmr's default — the only global state pmrkit ever creates, and only on request.
#pragma once

#include <memory>
#include <memory_resource>
#include <string>
#include <string_view>
#include <vector>

namespace pmrkit {

struct strategy_info {
  std::string name;
  std::string summary;
  // True when allocate/deallocate may be called concurrently from any threads, including
  // freeing a block on a thread other than the one that allocated it.
  bool thread_safe;
};

// Every strategy this build offers, in a stable order.
std::vector<strategy_info> strategies();

// Builds the strategy named by `spec`. Pool-like strategies take their memory from upstream.
// Throws std::invalid_argument for an unknown name (the message lists every valid name), an
// unknown option key, or a malformed or out-of-range value (the message names the key and
// what is allowed).
std::unique_ptr<std::pmr::memory_resource> make_resource(
    std::string_view spec, std::pmr::memory_resource* upstream = std::pmr::new_delete_resource());

// Reads PMRKIT_STRATEGY (a spec; unset or empty means "new_delete"), builds it once, installs
// it with std::pmr::set_default_resource and returns it. The resource lives until exit; later
// calls return the same resource. Throws like make_resource() for a bad spec.
std::pmr::memory_resource& install_default_from_env();

}  // namespace pmrkit
