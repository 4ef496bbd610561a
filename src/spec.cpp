#include "spec.hpp"

#include <algorithm>
#include <limits>
#include <stdexcept>

namespace pmrkit::detail {
namespace {

std::string_view trim(std::string_view s) {
  const auto space = [](char c) { return c == ' ' || c == '\t'; };
  while (!s.empty() && space(s.front())) s.remove_prefix(1);
  while (!s.empty() && space(s.back())) s.remove_suffix(1);
  return s;
}

std::string describe_size(std::size_t n) {
  if (n != 0 && n % (1ull << 30) == 0) return std::to_string(n >> 30) + "G";
  if (n != 0 && n % (1ull << 20) == 0) return std::to_string(n >> 20) + "M";
  if (n != 0 && n % (1ull << 10) == 0) return std::to_string(n >> 10) + "K";
  return std::to_string(n);
}

}  // namespace

parsed_spec parse_spec(std::string_view spec) {
  const std::string whole(spec);
  spec = trim(spec);
  parsed_spec out;
  const auto colon = spec.find(':');
  out.name = std::string(trim(spec.substr(0, colon)));
  if (out.name.empty())
    throw std::invalid_argument("pmrkit: strategy spec '" + whole +
                                "' has no strategy name; expected \"name\" or "
                                "\"name:key=value,key=value\"");
  if (colon == std::string_view::npos) return out;

  std::string_view rest = spec.substr(colon + 1);
  while (true) {
    const auto comma = rest.find(',');
    const std::string_view item = trim(rest.substr(0, comma));
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

bool parse_size(std::string_view text, std::size_t& out) noexcept {
  text = trim(text);
  std::size_t digits = 0;
  std::size_t value = 0;
  constexpr std::size_t max = std::numeric_limits<std::size_t>::max();
  while (digits < text.size() && text[digits] >= '0' && text[digits] <= '9') {
    const std::size_t d = static_cast<std::size_t>(text[digits] - '0');
    if (value > (max - d) / 10) return false;
    value = value * 10 + d;
    ++digits;
  }
  if (digits == 0) return false;
  std::string_view suffix = text.substr(digits);
  unsigned shift = 0;
  if (!suffix.empty()) {
    switch (suffix.front()) {
      case 'k': case 'K': shift = 10; break;
      case 'm': case 'M': shift = 20; break;
      case 'g': case 'G': shift = 30; break;
      default: return false;
    }
    suffix.remove_prefix(1);
    if (!(suffix.empty() || suffix == "iB" || suffix == "B")) return false;
  }
  if (shift != 0 && value > (max >> shift)) return false;
  out = value << shift;
  return true;
}

option_reader::option_reader(std::string strategy,
                             std::vector<std::pair<std::string, std::string>> options)
    : strategy_(std::move(strategy)), options_(std::move(options)) {}

const std::string* option_reader::find(std::string_view key) {
  if (std::find(known_keys_.begin(), known_keys_.end(), key) == known_keys_.end())
    known_keys_.emplace_back(key);
  for (const auto& [k, v] : options_)
    if (k == key) return &v;
  return nullptr;
}

void option_reader::reject(std::string_view key, const std::string& value,
                           const std::string& allowed) const {
  throw std::invalid_argument("pmrkit: strategy '" + strategy_ + "': option " +
                              std::string(key) + "=" + value + " is invalid; " + allowed);
}

std::size_t option_reader::size(std::string_view key, std::size_t fallback, std::size_t min,
                                std::size_t max) {
  const std::string* text = find(key);
  if (!text) return fallback;
  std::size_t value = 0;
  const std::string allowed = "allowed: a size from " + describe_size(min) + " to " +
                              describe_size(max) +
                              " (a number, optionally with a K, M or G suffix)";
  if (!parse_size(*text, value) || value < min || value > max) reject(key, *text, allowed);
  return value;
}

std::size_t option_reader::power_of_two(std::string_view key, std::size_t fallback,
                                        std::size_t min, std::size_t max) {
  const std::size_t value = size(key, fallback, min, max);
  if ((value & (value - 1)) != 0)
    reject(key, *find(key),
           "allowed: a power of two from " + describe_size(min) + " to " + describe_size(max));
  return value;
}

std::string option_reader::choice(std::string_view key, std::string_view fallback,
                                  std::initializer_list<std::string_view> allowed) {
  const std::string* text = find(key);
  if (!text) return std::string(fallback);
  for (auto a : allowed)
    if (*text == a) return *text;
  std::string list;
  for (auto a : allowed) list += (list.empty() ? "" : ", ") + std::string(a);
  reject(key, *text, "allowed: one of " + list);
}

void option_reader::finish() const {
  for (const auto& [key, value] : options_) {
    if (std::find(known_keys_.begin(), known_keys_.end(), key) != known_keys_.end()) continue;
    std::string list;
    for (const auto& k : known_keys_) list += (list.empty() ? "" : ", ") + k;
    throw std::invalid_argument("pmrkit: strategy '" + strategy_ + "' has no option '" + key +
                                "'; " +
                                (list.empty() ? std::string("it takes no options")
                                              : "its options are: " + list));
  }
}

}  // namespace pmrkit::detail
