#include "spec.hpp"

#include <algorithm>
#include <limits>
#include <stdexcept>

namespace pmrkit::detail {
namespace {

// Any ASCII white space: a spec read from a file or an environment variable set from one may
// end in a line break (\n, or \r\n from a file written on Windows).
std::string_view trim(std::string_view s) {
  const auto space = [](char c) {
    return c == ' ' || c == '\t' || c == '\n' || c == '\r' || c == '\v' || c == '\f';
  };
  while (!s.empty() && space(s.front())) s.remove_prefix(1);
  while (!s.empty() && space(s.back())) s.remove_suffix(1);
  return s;
}

// ASCII only, as the units are.
bool equal_ignoring_case(std::string_view text, std::string_view lower) noexcept {
  if (text.size() != lower.size()) return false;
  for (std::size_t i = 0; i < text.size(); ++i) {
    const char c = text[i] >= 'A' && text[i] <= 'Z' ? static_cast<char>(text[i] - 'A' + 'a')
                                                    : text[i];
    if (c != lower[i]) return false;
  }
  return true;
}

}  // namespace

std::string spec_name(std::string_view spec) {
  const std::string_view trimmed = trim(spec);
  std::string name(trim(trimmed.substr(0, trimmed.find(':'))));
  if (name.empty())
    throw std::invalid_argument("pmrkit: strategy spec '" + std::string(spec) +
                                "' has no strategy name; expected \"name\" or "
                                "\"name:key=value,key=value\"");
  return name;
}

parsed_spec parse_spec(std::string_view spec) {
  const std::string whole(spec);
  parsed_spec out;
  out.name = spec_name(spec);
  spec = trim(spec);
  const auto colon = spec.find(':');
  if (colon == std::string_view::npos) return out;

  std::string_view rest = spec.substr(colon + 1);
  while (true) {
    const auto comma = rest.find(',');
    const std::string_view item = trim(rest.substr(0, comma));
    if (item.empty())
      throw std::invalid_argument("pmrkit: spec '" + whole +
                                  "' has an empty option (a stray ',', or ':' with nothing "
                                  "after it); expected \"name:key=value,key=value\"");
    const auto eq = item.find('=');
    if (eq == std::string_view::npos || trim(item.substr(0, eq)).empty() ||
        trim(item.substr(eq + 1)).empty())
      throw std::invalid_argument("pmrkit: option '" + std::string(item) + "' in spec '" +
                                  whole + "' is not of the form key=value");
    std::string key(trim(item.substr(0, eq)));
    const bool repeated = std::any_of(out.options.begin(), out.options.end(),
                                      [&](const auto& kv) { return kv.first == key; });
    if (repeated)
      throw std::invalid_argument("pmrkit: option '" + key + "' is given twice in spec '" +
                                  whole + "'");
    out.options.emplace_back(std::move(key), std::string(trim(item.substr(eq + 1))));
    if (comma == std::string_view::npos) break;
    rest.remove_prefix(comma + 1);
  }
  return out;
}

size_text read_size(std::string_view text, std::size_t& out) noexcept {
  text = trim(text);
  std::size_t digits = 0;
  std::size_t value = 0;
  bool too_large = false;  // the digits alone pass SIZE_MAX; the rest must still be read
  constexpr std::size_t max = std::numeric_limits<std::size_t>::max();
  while (digits < text.size() && text[digits] >= '0' && text[digits] <= '9') {
    const std::size_t d = static_cast<std::size_t>(text[digits] - '0');
    if (value > (max - d) / 10) too_large = true;
    if (!too_large) value = value * 10 + d;
    ++digits;
  }
  if (digits == 0) return size_text::malformed;
  std::string_view suffix = text.substr(digits);
  unsigned shift = 0;
  if (!suffix.empty()) {
    switch (suffix.front()) {
      case 'k': case 'K': shift = 10; break;
      case 'm': case 'M': shift = 20; break;
      case 'g': case 'G': shift = 30; break;
      default: return size_text::malformed;
    }
    suffix.remove_prefix(1);
    // Whatever case the unit came in: "64kb", "64KIB" and "64kiB" are all 64 KiB.
    if (!(suffix.empty() || equal_ignoring_case(suffix, "ib") || equal_ignoring_case(suffix, "b")))
      return size_text::malformed;
  }
  if (too_large || (shift != 0 && value > (max >> shift))) return size_text::too_large;
  out = value << shift;
  return size_text::size;
}

bool parse_size(std::string_view text, std::size_t& out) noexcept {
  return read_size(text, out) == size_text::size;
}

std::string format_size(std::size_t n) {
  if (n != 0 && n % (1ull << 30) == 0) return std::to_string(n >> 30) + "G";
  if (n != 0 && n % (1ull << 20) == 0) return std::to_string(n >> 20) + "M";
  if (n != 0 && n % (1ull << 10) == 0) return std::to_string(n >> 10) + "K";
  return std::to_string(n);
}

std::string describe_allowed(const option_definition& option) {
  switch (option.kind) {
    case option_kind::size:
      return "a size from " + format_size(option.min) + " to " + format_size(option.max);
    case option_kind::power_of_two:
      return "a power of two from " + format_size(option.min) + " to " + format_size(option.max);
    case option_kind::choice:
      break;
  }
  std::string list;
  for (std::string_view a : option.allowed) list += (list.empty() ? "" : ", ") + std::string(a);
  return "one of " + list;
}

option_reader::option_reader(std::string_view strategy,
                             std::span<const option_definition> declared,
                             std::vector<std::pair<std::string, std::string>> given)
    : strategy_(strategy), declared_(declared), given_(std::move(given)) {
  for (const auto& given_option : given_) {
    const std::string& key = given_option.first;  // clang 14 cannot capture a structured binding
    const bool known = std::any_of(declared_.begin(), declared_.end(),
                                   [&](const option_definition& o) { return o.name == key; });
    if (known) continue;
    std::string list;
    for (const auto& o : declared_) list += (list.empty() ? "" : ", ") + std::string(o.name);
    throw std::invalid_argument("pmrkit: strategy '" + strategy_ + "' has no option '" + key +
                                "'; " +
                                (list.empty() ? std::string("it takes no options")
                                              : "its options are: " + list));
  }
}

const option_definition& option_reader::declared(std::string_view key, bool choice) {
  for (const auto& o : declared_) {
    if (o.name != key) continue;
    if ((o.kind == option_kind::choice) != choice) break;
    if (std::find(read_.begin(), read_.end(), key) == read_.end()) read_.push_back(o.name);
    return o;
  }
  throw std::logic_error("pmrkit: strategy '" + strategy_ + "' reads option '" +
                         std::string(key) + "', which its option table does not declare as a " +
                         (choice ? "choice" : "size"));
}

const std::string* option_reader::value_of(std::string_view key) const {
  for (const auto& [k, v] : given_)
    if (k == key) return &v;
  return nullptr;
}

bool option_reader::given(std::string_view key) const { return value_of(key) != nullptr; }

void option_reader::reject(std::string_view key, const std::string& allowed) const {
  const std::string* value = value_of(key);
  throw std::invalid_argument("pmrkit: strategy '" + strategy_ + "': option " +
                              std::string(key) + "=" + (value ? *value : std::string()) +
                              " is invalid; " + allowed);
}

std::size_t option_reader::size(std::string_view key) {
  const option_definition& option = declared(key, false);
  const std::string* text = value_of(key);
  if (!text) return option.default_size;
  std::size_t value = 0;
  // The format hint only for text that is not a size at all: "max_pooled=2M" and
  // "max_retained=99999999999999999999" are well formed and merely out of range.
  const size_text read = read_size(*text, value);
  if (read == size_text::malformed)
    reject(key, "allowed: " + describe_allowed(option) +
                    " (a number, optionally with a K, M or G suffix: 64K, 64KiB)");
  if (read == size_text::too_large || value < option.min || value > option.max ||
      (option.kind == option_kind::power_of_two && (value & (value - 1)) != 0))
    reject(key, "allowed: " + describe_allowed(option));
  return value;
}

std::string option_reader::choice(std::string_view key) {
  const option_definition& option = declared(key, true);
  const std::string* text = value_of(key);
  if (!text) return std::string(option.default_choice);
  for (std::string_view a : option.allowed)
    if (*text == a) return *text;
  reject(key, "allowed: " + describe_allowed(option));
}

void option_reader::finish() const {
  for (const auto& o : declared_)
    if (std::find(read_.begin(), read_.end(), o.name) == read_.end())
      throw std::logic_error("pmrkit: strategy '" + strategy_ + "' declares option '" +
                             std::string(o.name) + "' but its factory never reads it");
}

}  // namespace pmrkit::detail
