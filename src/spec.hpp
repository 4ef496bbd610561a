// Internal: parsing of strategy specs ("name:key=value,...") and typed, checked option reads.
// Each strategy declares its options once, in a constexpr table of option_definition (name,
// kind, default, range or allowed values, one-line description). Its factory reads values
// only through an option_reader bound to that table, so the ranges and defaults it applies are
// the ones strategies() reports and docs/strategies.md lists. Unknown keys are rejected before
// the factory runs; finish() then insists the factory read every option it declared.
#pragma once

#include <cstddef>
#include <span>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "pmrkit/registry.hpp"

namespace pmrkit::detail {

struct parsed_spec {
  std::string name;
  std::vector<std::pair<std::string, std::string>> options;  // in the order written
};

// The strategy name a spec starts with (before any ':'), without white space. Throws
// std::invalid_argument when it is empty. The registry looks the name up before it parses the
// options, so that a misspelt name is what the user hears of first.
std::string spec_name(std::string_view spec);

// Splits a spec. Throws std::invalid_argument for an empty name, an empty option (a stray ','),
// an option without '=', an empty key or value, or a key given twice.
parsed_spec parse_spec(std::string_view spec);

// What a text written as a size holds.
enum class size_text {
  size,       // a size: read_size stored it
  malformed,  // not written as a size at all
  too_large,  // written as a size, but past SIZE_MAX
};

// Reads "123", "64K", "1M", "2G" (also "64KiB", "64k"); binary multiples.
size_text read_size(std::string_view text, std::size_t& out) noexcept;

// read_size(text, out) == size_text::size.
bool parse_size(std::string_view text, std::size_t& out) noexcept;

// A size as a spec would write it: the largest exact K/M/G multiple ("64K"), else digits.
std::string format_size(std::size_t n);

// One option of one strategy. Build it with size_option/power_of_two_option/choice_option,
// which refuse (at compile time, in a constexpr table) a default outside its own range.
struct option_definition {
  std::string_view name;
  option_kind kind;
  std::size_t default_size;  // sizes
  std::size_t min;           // sizes, inclusive
  std::size_t max;           // sizes, inclusive
  std::string_view default_choice;            // choices
  std::span<const std::string_view> allowed;  // choices
  std::string_view description;
};

constexpr option_definition size_option(std::string_view name, std::size_t fallback,
                                        std::size_t min, std::size_t max,
                                        std::string_view description) {
  if (min > max || fallback < min || fallback > max)
    throw "pmrkit: a size option's default lies outside its range";
  return {name, option_kind::size, fallback, min, max, {}, {}, description};
}

constexpr option_definition power_of_two_option(std::string_view name, std::size_t fallback,
                                                std::size_t min, std::size_t max,
                                                std::string_view description) {
  option_definition o = size_option(name, fallback, min, max, description);
  if ((fallback & (fallback - 1)) != 0)
    throw "pmrkit: a power-of-two option's default is not a power of two";
  o.kind = option_kind::power_of_two;
  return o;
}

constexpr option_definition choice_option(std::string_view name, std::string_view fallback,
                                          std::span<const std::string_view> allowed,
                                          std::string_view description) {
  bool listed = false;
  for (std::string_view a : allowed) listed = listed || a == fallback;
  if (!listed) throw "pmrkit: a choice option's default is not one of its allowed values";
  return {name, option_kind::choice, 0, 0, 0, fallback, allowed, description};
}

// What the option accepts, in words, e.g. "a power of two from 8 to 1M".
std::string describe_allowed(const option_definition& option);

class option_reader {
 public:
  // Throws std::invalid_argument if `given` holds a key that `declared` does not list; the
  // message lists the keys this strategy accepts.
  option_reader(std::string_view strategy, std::span<const option_definition> declared,
                std::vector<std::pair<std::string, std::string>> given);

  // The value of a size or power_of_two option: as given (checked against its range), else
  // its default. Throws std::invalid_argument for a malformed or out-of-range value, and
  // std::logic_error for a key the table does not declare as a size (a bug in the strategy).
  std::size_t size(std::string_view key);
  // The value of a choice option, as given (checked) or its default.
  std::string choice(std::string_view key);
  // True when the spec gave this option (for defaults that depend on another option).
  bool given(std::string_view key) const;
  // For constraints between options: throws std::invalid_argument naming the given value of
  // `key` and `allowed` (a phrase such as "allowed: at least chunk_size (64K)").
  [[noreturn]] void reject(std::string_view key, const std::string& allowed) const;

  // Throws std::logic_error if the factory left a declared option unread: an option that is
  // listed but silently ignored would be a lie in strategies() and the docs.
  void finish() const;

 private:
  const option_definition& declared(std::string_view key, bool choice);
  const std::string* value_of(std::string_view key) const;

  std::string strategy_;
  std::span<const option_definition> declared_;
  std::vector<std::pair<std::string, std::string>> given_;
  std::vector<std::string_view> read_;
};

}  // namespace pmrkit::detail
