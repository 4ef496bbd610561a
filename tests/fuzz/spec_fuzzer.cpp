// Fuzz target: strategy specs. Any byte string goes through parse_spec, parse_size and
// make_resource. Each must either succeed or throw std::invalid_argument (std::bad_alloc only
// from an upstream refusing a fuzzed size), and what succeeds must make sense:
//  - a parsed spec has a non-empty name, non-empty keys and values, no key twice, and prints
//    back to a spec that parses to the same thing;
//  - read_size agrees with a 128-bit reference (no silent overflow; too large told from
//    malformed);
//  - a resource made from the spec serves, keeps and frees a few blocks, and gives every
//    upstream byte back when destroyed.
#include <cctype>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <memory_resource>
#include <new>
#include <stdexcept>
#include <string>
#include <string_view>

#include "fuzz_support.hpp"
#include "pmrkit/registry.hpp"
#include "spec.hpp"

namespace {

using pmrkit::fuzz::broken;
__extension__ typedef unsigned __int128 wide;  // wide enough that no size overflows it

// read_size as documented: digits, then optionally K, M or G followed by nothing, "B" or
// "iB", all in either case; ASCII white space around it (line breaks included) ignored;
// too_large for a text so written whose value passes SIZE_MAX.
pmrkit::detail::size_text reference_size(std::string_view text, std::size_t& out) {
  using pmrkit::detail::size_text;
  const auto space = [](char c) {
    return c == ' ' || c == '\t' || c == '\n' || c == '\r' || c == '\v' || c == '\f';
  };
  while (!text.empty() && space(text.front())) text.remove_prefix(1);
  while (!text.empty() && space(text.back())) text.remove_suffix(1);
  wide value = 0;
  bool too_large = false;
  std::size_t i = 0;
  for (; i < text.size() && text[i] >= '0' && text[i] <= '9'; ++i) {
    if (!too_large) value = value * 10 + static_cast<unsigned>(text[i] - '0');
    too_large = too_large || value > SIZE_MAX;
  }
  if (i == 0) return size_text::malformed;
  std::string_view suffix = text.substr(i);
  if (!suffix.empty()) {
    const char unit = suffix.front();
    const unsigned shift = unit == 'k' || unit == 'K'   ? 10
                           : unit == 'm' || unit == 'M' ? 20
                           : unit == 'g' || unit == 'G' ? 30
                                                        : 0;
    if (shift == 0) return size_text::malformed;
    suffix.remove_prefix(1);
    std::string tail(suffix);
    for (char& c : tail) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
    if (!(tail.empty() || tail == "b" || tail == "ib")) return size_text::malformed;
    if (!too_large) value <<= shift;
    too_large = too_large || value > SIZE_MAX;
  }
  if (too_large) return size_text::too_large;
  out = static_cast<std::size_t>(value);
  return size_text::size;
}

void check_size(std::string_view text) {
  std::size_t got = 0;
  std::size_t expected = 0;
  const pmrkit::detail::size_text read = pmrkit::detail::read_size(text, got);
  if (read != reference_size(text, expected))
    broken("read_size tells a size, a malformed text and a too large one apart wrongly");
  if (pmrkit::detail::parse_size(text, got) != (read == pmrkit::detail::size_text::size))
    broken("parse_size disagrees with read_size");
  if (read == pmrkit::detail::size_text::size && got != expected)
    broken("read_size returned the wrong value");
}

void check_parsed(const pmrkit::detail::parsed_spec& parsed) {
  if (parsed.name.empty()) broken("parse_spec accepted an empty name");
  std::string printed = parsed.name;
  for (std::size_t i = 0; i < parsed.options.size(); ++i) {
    const auto& [key, value] = parsed.options[i];
    if (key.empty() || value.empty()) broken("parse_spec accepted an empty key or value");
    for (std::size_t j = 0; j < i; ++j)
      if (parsed.options[j].first == key) broken("parse_spec accepted a key twice");
    printed += (i == 0 ? ":" : ",") + key + "=" + value;
    check_size(value);
  }
  pmrkit::detail::parsed_spec again;
  try {
    again = pmrkit::detail::parse_spec(printed);
  } catch (const std::invalid_argument&) {
    broken("a parsed spec, printed back, no longer parses");
  }
  if (again.name != parsed.name || again.options != parsed.options)
    broken("a parsed spec, printed back, parses differently");
}

void exercise(std::pmr::memory_resource& r) {
  void* blocks[4] = {};
  const std::size_t sizes[4] = {1, 64, 3000, 100000};
  try {
    for (int i = 0; i < 4; ++i) {
      blocks[i] = r.allocate(sizes[i], 16);
      static_cast<unsigned char*>(blocks[i])[sizes[i] - 1] = static_cast<unsigned char>(i);
    }
  } catch (const std::bad_alloc&) {  // an upstream refusing a fuzzed chunk size
  }
  for (int i = 0; i < 4; ++i) {
    if (!blocks[i]) continue;
    if (static_cast<unsigned char*>(blocks[i])[sizes[i] - 1] != i) broken("blocks overlap");
    r.deallocate(blocks[i], sizes[i], 16);
  }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  const std::string_view spec(reinterpret_cast<const char*>(data), size);
  check_size(spec);
  try {
    check_parsed(pmrkit::detail::parse_spec(spec));
  } catch (const std::invalid_argument&) {
  }
  pmrkit::fuzz::bounded_upstream upstream;
  try {
    const auto r = pmrkit::make_resource(spec, &upstream);
    if (!r) broken("make_resource returned null");
    exercise(*r);
  } catch (const std::invalid_argument&) {
  } catch (const std::bad_alloc&) {
  }
  if (upstream.blocks_in_use() != 0) broken("a destroyed resource kept upstream memory");
  return 0;
}
