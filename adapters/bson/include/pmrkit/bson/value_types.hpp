// pmrkit/bson/value_types.hpp — the BSON values that are more than a C++ scalar or string:
// ObjectId, Decimal128 and timestamp, as plain values for document's append_* calls.
//
// Plain aggregates: copy them freely, share them between threads. Their factories parse text
// and throw std::invalid_argument saying what was wrong and what is allowed; they allocate
// nothing beyond the exception.
// object_id::generate() is thread-safe.
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <string_view>

namespace pmrkit::bson {

// A 12-byte ObjectId.
struct object_id {
  std::array<std::byte, 12> bytes{};
  // A new id from libbson's process-wide generator (time, random per process, counter);
  // thread-safe.
  static object_id generate();
  // The id written as 24 hexadecimal digits, either case ("65a1b2c3d4e5f60718293a4b", as
  // MongoDB shows it). std::invalid_argument for any other length or a non-hex character.
  static object_id from_hex(std::string_view hex);
  friend bool operator==(const object_id&, const object_id&) = default;
};

// An IEEE 754-2008 128-bit decimal in the BID encoding BSON uses, as its two 64-bit halves
// (`low` is written first, both little-endian).
struct decimal128 {
  std::uint64_t high = 0;
  std::uint64_t low = 0;
  // Parses "1.5", "-0.001", "1E+3", "Infinity" (or "Inf"), "NaN", "sNaN" (case-insensitive,
  // optionally signed) as the BSON spec and pymongo do: the value must be held exactly by at
  // most 34 significant digits and an exponent of -6176..6111. Digits past 34 may only be
  // trailing zeros, a zero's exponent is clamped into range, and an exponent out of range is
  // brought in by padding or dropping trailing zeros where that is exact; otherwise trailing
  // zeros are kept ("1.50" differs from "1.5"). std::invalid_argument for anything else,
  // including a value that would need rounding. Reads only the view; allocates nothing.
  static decimal128 from_string(std::string_view text);
  friend bool operator==(const decimal128&, const decimal128&) = default;
};

// A BSON timestamp (MongoDB's internal replication clock, not a date: use append_date_time for
// dates): seconds since the Unix epoch and an ordinal within that second.
struct timestamp {
  std::uint32_t seconds = 0;
  std::uint32_t increment = 0;
  friend bool operator==(const timestamp&, const timestamp&) = default;
};

}  // namespace pmrkit::bson
