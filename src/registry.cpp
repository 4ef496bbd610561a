#include "pmrkit/registry.hpp"

#include <cstdlib>
#include <stdexcept>

#include "spec.hpp"
#include "strategy.hpp"

namespace pmrkit {
namespace {

using detail::strategy_definition;

std::string valid_names() {
  std::string names;
  for (const auto* s : detail::registered_strategies())
    names += (names.empty() ? "" : ", ") + std::string(s->name);
  return names;
}

const strategy_definition& find_strategy(std::string_view name) {
  for (const auto* s : detail::registered_strategies())
    if (name == s->name) return *s;
  throw std::invalid_argument("pmrkit: unknown strategy '" + std::string(name) +
                              "'; valid strategies are: " + valid_names());
}

option_info info_of(const detail::option_definition& o) {
  option_info info{std::string(o.name), o.kind, {}, o.min, o.max, {}, std::string(o.description)};
  if (o.kind == option_kind::choice) {
    info.default_value = o.default_choice;
    info.allowed.assign(o.allowed.begin(), o.allowed.end());
  } else {
    info.default_value = detail::format_size(o.default_size);
  }
  return info;
}

strategy_info info_of(const strategy_definition& s) {
  strategy_info info{std::string(s.name), std::string(s.summary), s.can.thread_safe,
                     s.can.uses_upstream, s.can.reuses_memory, s.can.bound_to_thread, {}};
  for (const auto& o : s.options) info.options.push_back(info_of(o));
  return info;
}

}  // namespace

std::vector<strategy_info> strategies() {
  std::vector<strategy_info> out;
  for (const auto* s : detail::registered_strategies()) out.push_back(info_of(*s));
  return out;
}

strategy_info describe_strategy(std::string_view spec) {
  return info_of(find_strategy(detail::parse_spec(spec).name));
}

std::unique_ptr<std::pmr::memory_resource> make_resource(std::string_view spec,
                                                         std::pmr::memory_resource* upstream) {
  detail::parsed_spec parsed = detail::parse_spec(spec);
  const strategy_definition& strategy = find_strategy(parsed.name);
  if (!upstream)
    throw std::invalid_argument("pmrkit: make_resource(\"" + std::string(spec) +
                                "\") was given a null upstream resource");
  detail::option_reader options(strategy.name, strategy.options, std::move(parsed.options));
  auto resource = strategy.make(options, upstream);
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
