// Internal: the registry's table. One row per strategy: its public description, what the
// conformance suite needs to know about it, and its factory. Adding a strategy means adding a
// row in registry.cpp (and its factory beside the resource).
#pragma once

#include <memory>
#include <memory_resource>
#include <span>

#include "pmrkit/registry.hpp"
#include "spec.hpp"

namespace pmrkit::detail {

using factory_fn = std::unique_ptr<std::pmr::memory_resource> (*)(
    option_reader& options, std::pmr::memory_resource* upstream);

struct strategy_entry {
  const char* name;
  const char* summary;
  bool thread_safe;
  // Takes its memory from `upstream` (false: from the OS or the global heap directly).
  bool uses_upstream;
  // deallocate() makes memory available to later allocations (false for monotonic).
  bool reuses_memory;
  factory_fn make;
};

std::span<const strategy_entry> strategy_table();
const strategy_entry* find_strategy(std::string_view name);

}  // namespace pmrkit::detail
