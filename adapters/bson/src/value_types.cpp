#include "pmrkit/bson/value_types.hpp"

#include <bson/bson.h>

#include <climits>
#include <cstdio>
#include <cstring>
#include <stdexcept>
#include <string>

namespace pmrkit::bson {
namespace {

// `text` quoted for an error message: control and non-ASCII bytes as \xNN, long input cut, so
// a message stays one readable line whatever the caller passed.
std::string quoted(std::string_view text) {
  constexpr std::size_t shown = 64;
  std::string out = "\"";
  for (const char c : text.substr(0, shown)) {
    const auto byte = static_cast<unsigned char>(c);
    if (byte < 0x20 || byte >= 0x7F || c == '"' || c == '\\') {
      char escaped[5];
      std::snprintf(escaped, sizeof escaped, "\\x%02X", byte);
      out += escaped;
    } else {
      out += c;
    }
  }
  out += '"';
  if (text.size() > shown) out += " (" + std::to_string(text.size()) + " bytes, first " +
                                 std::to_string(shown) + " shown)";
  return out;
}

int hex_value(char c) noexcept {
  if (c >= '0' && c <= '9') return c - '0';
  if (c >= 'a' && c <= 'f') return c - 'a' + 10;
  if (c >= 'A' && c <= 'F') return c - 'A' + 10;
  return -1;
}

}  // namespace

object_id object_id::generate() {
  bson_oid_t oid;
  bson_oid_init(&oid, nullptr);  // libbson's default context: thread-safe
  object_id id;
  std::memcpy(id.bytes.data(), oid.bytes, sizeof oid.bytes);
  return id;
}

object_id object_id::from_hex(std::string_view hex) {
  object_id id;
  constexpr std::size_t digits = 2 * std::tuple_size_v<decltype(id.bytes)>;
  if (hex.size() != digits) {
    throw std::invalid_argument("pmrkit::bson::object_id::from_hex: " + quoted(hex) + " has " +
                                std::to_string(hex.size()) + " characters: an ObjectId is " +
                                std::to_string(digits) + " hexadecimal digits (0-9, a-f, A-F)");
  }
  for (std::size_t i = 0; i < digits; ++i) {
    if (hex_value(hex[i]) < 0) {
      throw std::invalid_argument("pmrkit::bson::object_id::from_hex: " + quoted(hex) +
                                  " has a non-hexadecimal character at position " +
                                  std::to_string(i) + ": allowed are 0-9, a-f, A-F");
    }
  }
  for (std::size_t i = 0; i < id.bytes.size(); ++i) {
    id.bytes[i] = std::byte(hex_value(hex[2 * i]) << 4 | hex_value(hex[2 * i + 1]));
  }
  return id;
}

decimal128 decimal128::from_string(std::string_view text) {
  bson_decimal128_t parsed;
  // libbson's parser ends the text at a NUL even within the length it is given, and would
  // accept "1.5\0junk" as 1.5, so a NUL is refused first. And parts of it read the text as a
  // NUL-terminated string whatever the length (the exponent, "Infinity", "NaN": "1.5" cut from
  // "1.5e5" read as 1.5E+5, an empty view at null crashed), so it gets a terminated copy: on
  // the stack for any text a decimal is written in, on the heap past that.
  constexpr std::size_t on_stack = 128;
  char copy[on_stack];
  std::string long_copy;
  const char* terminated = copy;
  if (text.size() < on_stack) {
    text.copy(copy, text.size());  // (an empty view's data() may be null: no memcpy)
    copy[text.size()] = '\0';
  } else if (text.size() <= INT_MAX) {
    long_copy = text;
    terminated = long_copy.c_str();
  }
  if (text.size() > INT_MAX || text.find('\0') != std::string_view::npos ||
      !bson_decimal128_from_string_w_len(terminated, static_cast<int>(text.size()), &parsed)) {
    throw std::invalid_argument(
        "pmrkit::bson::decimal128::from_string: " + quoted(text) +
        " is not a Decimal128: allowed are an optionally signed decimal number with at most 34 "
        "significant digits and exponent -6176..6111 (\"-1.5\", \"2.50E+3\"), \"Infinity\", "
        "\"-Infinity\" or \"NaN\"");
  }
  return {parsed.high, parsed.low};
}

}  // namespace pmrkit::bson
