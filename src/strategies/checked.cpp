// Strategy "checked": checks every use of memory (checked_resource); for tests and debugging.
#include <algorithm>
#include <iterator>

#include "pmrkit/checked_resource.hpp"
#include "strategy.hpp"

namespace pmrkit::detail::strategies {
namespace {

constexpr checked_options defaults{};
// Indexed by the enums' values, so that a choice, its enum and its default cannot disagree.
// error_action's last value, record, has no name here: it keeps violations for a caller to read
// (violation_report()), and a resource made from a spec has no such caller; log prints them.
constexpr std::string_view on_error_values[] = {"abort", "throw", "log"};  // error_action
static_assert(std::size(on_error_values) ==
              static_cast<std::size_t>(checked_options::error_action::record));
constexpr std::string_view on_leak_values[] = {"report", "abort", "ignore"};  // leak_action

template <class Enum, std::size_t N>
constexpr std::string_view name_of(Enum value, const std::string_view (&names)[N]) {
  return names[static_cast<std::size_t>(value)];
}

template <class Enum, std::size_t N>
Enum value_of(std::string_view name, const std::string_view (&names)[N]) {
  return static_cast<Enum>(std::find(std::begin(names), std::end(names), name) -
                           std::begin(names));
}

constexpr option_definition option_table[] = {
    choice_option("on_error", name_of(defaults.on_error, on_error_values), on_error_values,
                  "what a violation does: print and abort; throw pmrkit::allocation_error; or, "
                  "for a bad free, print it and return (the program goes on)"),
    choice_option("on_leak", name_of(defaults.on_leak, on_leak_values), on_leak_values,
                  "blocks live at destruction: list them on stderr, abort, or say nothing"),
    size_option("guard", defaults.guard_bytes, 0, checked_options::max_guard_bytes,
                "guard bytes after each block (before it: rounded up to its alignment), "
                "checked on free"),
    size_option("quarantine", defaults.quarantine_blocks, 0, std::size_t{1} << 24,
                "freed blocks kept poisoned before reuse"),
    size_option("quarantine_bytes", defaults.quarantine_bytes, 0, std::size_t{1} << 40,
                "bytes the quarantine may hold"),
};

resource_ptr make(option_reader& options, std::pmr::memory_resource* upstream) {
  checked_options o;
  using error_action = checked_options::error_action;
  using leak_action = checked_options::leak_action;
  o.on_error = value_of<error_action>(options.choice("on_error"), on_error_values);
  o.on_leak = value_of<leak_action>(options.choice("on_leak"), on_leak_values);
  o.guard_bytes = options.size("guard");
  o.quarantine_blocks = options.size("quarantine");
  o.quarantine_bytes = options.size("quarantine_bytes");
  return std::make_unique<checked_resource>(o, upstream);
}

}  // namespace

extern const strategy_definition checked{
    .name = "checked",
    .summary = "wraps upstream and checks every use: double or foreign frees, wrong size or "
               "alignment, overruns (guard bytes), writes after free (poisoned quarantine), "
               "blocks live at destruction; on_error=abort|throw|log; thread-safe (one "
               "mutex); for tests and debugging",
    .can = {.thread_safe = true, .uses_upstream = true, .reuses_memory = true},
    .options = option_table,
    .make = make,
};

}  // namespace pmrkit::detail::strategies
