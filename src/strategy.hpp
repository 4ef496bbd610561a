// Internal: what a strategy is to the registry. Each strategy is described once, in one file
// of a strategies folder (src/strategies/<name>.cpp), as a strategy_definition named after it
// in namespace pmrkit::detail::strategies: its name, one-line summary, capabilities, option
// table and factory. The folder's list.txt names the strategies in the order strategies()
// reports them, one line each; cmake/pmrkit_strategies.cmake compiles the folder and generates
// registered_strategies() from the list. See docs/architecture.md, "How to add a strategy".
#pragma once

#include <memory>
#include <memory_resource>
#include <span>
#include <string_view>

#include "spec.hpp"

namespace pmrkit::detail {

// The public capabilities of strategy_info, which the conformance suite holds each strategy to.
struct capabilities {
  bool thread_safe;
  bool uses_upstream;
  bool reuses_memory;
  bool bound_to_thread = false;
};

using resource_ptr = std::unique_ptr<std::pmr::memory_resource>;

// Reads options only through `options` (never with its own defaults or ranges).
using factory_fn = resource_ptr (*)(option_reader& options, std::pmr::memory_resource* upstream);

struct strategy_definition {
  std::string_view name;
  std::string_view summary;  // one line
  capabilities can;
  std::span<const option_definition> options;
  factory_fn make;
};

// The strategies of this build, in listing order. Generated from the strategies folders'
// list.txt files (see cmake/pmrkit_strategies.cmake); immutable.
std::span<const strategy_definition* const> registered_strategies();

}  // namespace pmrkit::detail
