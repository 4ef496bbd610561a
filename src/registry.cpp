#include "pmrkit/registry.hpp"

#include <cstdlib>
#include <stdexcept>
#include <string>
#include <string_view>

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

// std::pmr's default resource is process-wide: every thread that builds a container without a
// resource allocates from it, so it must be a strategy any thread may use.
void check_serves_any_thread(const strategy_definition& s) {
  if (s.can.thread_safe && !s.can.bound_to_thread) return;
  std::string alternatives;
  for (const auto* other : detail::registered_strategies())
    if (other->can.thread_safe && !other->can.bound_to_thread)
      alternatives += (alternatives.empty() ? "" : ", ") + std::string(other->name);
  throw std::invalid_argument(
      "pmrkit: " + std::string(s.name) +
      (s.can.bound_to_thread ? " must be used on the thread that made it"
                             : " is not thread-safe") +
      ", and the default resource serves every thread of the process; choose one of " +
      alternatives +
      ", or, in a program that allocates from one thread only, call "
      "install_default_from_env(pmrkit::default_resource_users::one_thread)");
}

// An error of install_default_from_env, saying where the spec came from: the user may not
// know the variable is set.
std::string from_variable(const char* value, std::string_view why) {
  if (why.starts_with("pmrkit: ")) why.remove_prefix(8);
  return "pmrkit: PMRKIT_STRATEGY='" + std::string(value ? value : "") + "': " + std::string(why);
}

}  // namespace

std::vector<strategy_info> strategies() {
  std::vector<strategy_info> out;
  for (const auto* s : detail::registered_strategies()) out.push_back(info_of(*s));
  return out;
}

strategy_info describe_strategy(std::string_view spec) {
  const strategy_definition& strategy = find_strategy(detail::spec_name(spec));
  detail::parse_spec(spec);  // the option list must be well formed, though not checked
  return info_of(strategy);
}

std::unique_ptr<std::pmr::memory_resource> make_resource(std::string_view spec,
                                                         std::pmr::memory_resource* upstream) {
  const strategy_definition& strategy = find_strategy(detail::spec_name(spec));
  detail::parsed_spec parsed = detail::parse_spec(spec);
  if (!upstream)
    throw std::invalid_argument("pmrkit: make_resource(\"" + std::string(spec) +
                                "\") was given a null upstream resource");
  detail::option_reader options(strategy.name, strategy.options, std::move(parsed.options));
  auto resource = strategy.make(options, upstream);
  options.finish();
  return resource;
}

std::pmr::memory_resource& install_default_from_env(default_resource_users users) {
  // A function-local static: built once even when called from several threads, destroyed
  // never (it may still be in use by other statics' destructors at exit). A call that throws
  // leaves it unbuilt, so a later call tries again.
  static std::pmr::memory_resource* const installed = [users] {
    const char* env = std::getenv("PMRKIT_STRATEGY");
    std::string spec = env ? env : "";
    if (spec.find_first_not_of(" \t\n\r\v\f") == std::string::npos) spec = "new_delete";
    try {
      if (users == default_resource_users::any_thread)
        check_serves_any_thread(find_strategy(detail::spec_name(spec)));
      std::pmr::memory_resource* r = make_resource(spec).release();
      std::pmr::set_default_resource(r);
      return r;
    } catch (const std::invalid_argument& e) {
      throw std::invalid_argument(from_variable(env, e.what()));
    } catch (const std::runtime_error& e) {  // a library the strategy needs could not load
      throw std::runtime_error(from_variable(env, e.what()));
    }
  }();
  return *installed;
}

}  // namespace pmrkit
