// Internal: parsing of strategy specs ("name:key=value,...") and typed, checked option reads.
// Each strategy's factory asks for the options it understands; finish() then rejects any key
// nobody asked for, so a typo is an error rather than a silently ignored setting.
#pragma once

#include <cstddef>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace pmrkit::detail {

struct parsed_spec {
  std::string name;
  std::vector<std::pair<std::string, std::string>> options;  // in the order written
};

// Splits a spec. Throws std::invalid_argument for an empty name, an option without '=', an
// empty key or value, or a key given twice.
parsed_spec parse_spec(std::string_view spec);

// Parses "123", "64K", "1M", "2G" (also "64KiB", "64k"); binary multiples. Returns false on
// anything else or on overflow.
bool parse_size(std::string_view text, std::size_t& out) noexcept;

class option_reader {
 public:
  option_reader(std::string strategy, std::vector<std::pair<std::string, std::string>> options);

  // A size in [min, max] (inclusive); `fallback` when the key is absent.
  std::size_t size(std::string_view key, std::size_t fallback, std::size_t min, std::size_t max);
  // A size that must also be a power of two.
  std::size_t power_of_two(std::string_view key, std::size_t fallback, std::size_t min,
                           std::size_t max);
  // One of `allowed`; `fallback` when absent.
  std::string choice(std::string_view key, std::string_view fallback,
                     std::initializer_list<std::string_view> allowed);

  // Throws std::invalid_argument if an option was given that no read asked for; the message
  // lists the keys this strategy accepts.
  void finish() const;

 private:
  const std::string* find(std::string_view key);
  [[noreturn]] void reject(std::string_view key, const std::string& value,
                           const std::string& allowed) const;

  std::string strategy_;
  std::vector<std::pair<std::string, std::string>> options_;
  std::vector<std::string> known_keys_;
};

}  // namespace pmrkit::detail
