#include "pmrkit/bson/value_types.hpp"

#include <bson/bson.h>

#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <optional>
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

bool equals_ignoring_case(std::string_view text, std::string_view lower) {
  if (text.size() != lower.size()) return false;
  for (std::size_t i = 0; i < text.size(); ++i)
    if ((text[i] | 0x20) != lower[i]) return false;
  return true;
}

// Decimal128 from text as the spec and pymongo read it (IEEE 754 decimal arithmetic with 34
// digits, exponents -6176..6111, clamping on, and inexact results refused): digits beyond 34
// are dropped only if they are zeros, a zero's exponent is clamped into range, a large
// exponent is brought into range by padding the coefficient with zeros while it has room, and
// a small one by dropping trailing zeros. Not libbson's parser, which truncates exponents to
// 32 bits and drops digits after a leading zero; and it reads only the view, allocating
// nothing. nullopt for anything that is not such a number.
std::optional<decimal128> parse_decimal128(std::string_view text) {
  constexpr std::uint64_t sign_bit = std::uint64_t{1} << 63;
  constexpr std::uint64_t infinity = 0x7800000000000000;
  constexpr std::uint64_t nan = 0x7C00000000000000;
  constexpr std::uint64_t signaling_nan = 0x7E00000000000000;
  constexpr int max_digits = 34;
  constexpr long long max_exponent = 6111;
  constexpr long long min_exponent = -6176;
  constexpr long long exponent_bias = 6176;
  // Past this an exponent is out of reach of any text a decimal is written in; saturating
  // keeps the arithmetic below in range.
  constexpr long long exponent_cap = 1'000'000'000'000'000;

  std::size_t at = 0;
  bool negative = false;
  if (at < text.size() && (text[at] == '+' || text[at] == '-')) negative = text[at++] == '-';
  const std::uint64_t sign = negative ? sign_bit : 0;
  const std::string_view rest = text.substr(at);
  if (equals_ignoring_case(rest, "infinity") || equals_ignoring_case(rest, "inf"))
    return decimal128{sign | infinity, 0};
  if (equals_ignoring_case(rest, "nan")) return decimal128{sign | nan, 0};
  if (equals_ignoring_case(rest, "snan")) return decimal128{sign | signaling_nan, 0};

  // The significand: digits with at most one point, at least one digit.
  const std::size_t digits_begin = at;
  std::size_t digits = 0, after_point = 0, leading_zeros = 0, trailing_zeros = 0;
  bool point = false, nonzero_seen = false;
  for (; at < text.size(); ++at) {
    const char c = text[at];
    if (c == '.' && !point) {
      point = true;
    } else if (c >= '0' && c <= '9') {
      ++digits;
      if (point) ++after_point;
      if (c == '0') {
        if (nonzero_seen) ++trailing_zeros; else ++leading_zeros;
      } else {
        nonzero_seen = true;
        trailing_zeros = 0;
      }
    } else {
      break;
    }
  }
  const std::size_t digits_end = at;
  if (digits == 0) return std::nullopt;
  long long exponent = 0;
  if (at < text.size() && (text[at] == 'e' || text[at] == 'E')) {
    ++at;
    bool exponent_negative = false;
    if (at < text.size() && (text[at] == '+' || text[at] == '-'))
      exponent_negative = text[at++] == '-';
    const std::size_t exponent_begin = at;
    for (; at < text.size() && text[at] >= '0' && text[at] <= '9'; ++at)
      exponent = std::min(exponent * 10 + (text[at] - '0'), exponent_cap);
    if (at == exponent_begin) return std::nullopt;
    if (exponent_negative) exponent = -exponent;
  }
  if (at != text.size()) return std::nullopt;
  exponent -= static_cast<long long>(std::min<std::size_t>(after_point, exponent_cap));

  std::size_t significant = digits - leading_zeros;  // from the first nonzero digit on
  if (significant == 0) {
    exponent = std::clamp(exponent, min_exponent, max_exponent);
    return decimal128{sign | static_cast<std::uint64_t>(exponent + exponent_bias) << 49, 0};
  }
  // Digits beyond 34, then an exponent below the least: only trailing zeros may go.
  std::size_t dropped = 0;
  if (significant > max_digits) dropped = significant - max_digits;
  if (exponent + static_cast<long long>(dropped) < min_exponent)
    dropped = static_cast<std::size_t>(min_exponent - exponent);
  if (dropped > trailing_zeros) return std::nullopt;
  significant -= dropped;
  exponent += static_cast<long long>(dropped);
  // An exponent above the greatest: zeros padded onto the coefficient while it has room.
  std::size_t padded = 0;
  if (exponent > max_exponent) {
    padded = static_cast<std::size_t>(
        std::min<long long>(exponent - max_exponent,
                            max_digits - static_cast<long long>(significant)));
    exponent -= static_cast<long long>(padded);
    if (exponent > max_exponent) return std::nullopt;
  }

  __extension__ using uint128 = unsigned __int128;  // 10^34 < 2^113: a coefficient fits
  uint128 coefficient = 0;
  std::size_t taken = 0, seen = 0;
  for (std::size_t i = digits_begin; i < digits_end && taken < significant; ++i) {
    if (text[i] == '.') continue;
    if (seen++ < leading_zeros) continue;
    coefficient = coefficient * 10 + static_cast<unsigned>(text[i] - '0');
    ++taken;
  }
  for (std::size_t i = 0; i < padded; ++i) coefficient *= 10;
  const auto high = static_cast<std::uint64_t>(coefficient >> 64);
  const auto low = static_cast<std::uint64_t>(coefficient);
  return decimal128{sign | static_cast<std::uint64_t>(exponent + exponent_bias) << 49 | high, low};
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
  if (const std::optional<decimal128> value = parse_decimal128(text)) return *value;
  throw std::invalid_argument(
      "pmrkit::bson::decimal128::from_string: " + quoted(text) +
      " is not a Decimal128: allowed are an optionally signed decimal number whose value 34 "
      "significant digits and an exponent of -6176..6111 hold exactly (\"-1.5\", \"2.50E+3\"), "
      "\"Infinity\", \"Inf\", \"NaN\" or \"sNaN\", optionally signed");
}

}  // namespace pmrkit::bson
