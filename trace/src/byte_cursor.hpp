// Internal: bounds-checked reading of a byte stream, each failure a trace_format_error that
// says what was being read and at which byte.
#pragma once

#include <cstddef>
#include <cstdint>
#include <span>
#include <string>

#include "pmrkit/trace/trace_file.hpp"

namespace pmrkit::trace::detail {

class byte_cursor {
 public:
  explicit byte_cursor(std::span<const std::byte> bytes, std::size_t base = 0) noexcept
      : bytes_(bytes), base_(base) {}

  std::size_t offset() const noexcept { return base_ + at_; }
  std::size_t remaining() const noexcept { return bytes_.size() - at_; }
  bool empty() const noexcept { return at_ == bytes_.size(); }

  [[noreturn]] void fail(const std::string& what) const { fail_at(offset(), what); }
  [[noreturn]] static void fail_at(std::size_t offset, const std::string& what) {
    throw trace_format_error("pmrkit trace: " + what + " at byte " + std::to_string(offset) +
                             " of the uncompressed stream");
  }

  std::uint8_t byte(const char* what) {
    if (empty()) fail(std::string("truncated: the stream ends inside ") + what);
    return static_cast<std::uint8_t>(bytes_[at_++]);
  }

  // LEB128, at most 10 bytes, the last holding only the 64th bit.
  std::uint64_t varint(const char* what) {
    const std::size_t start = offset();
    std::uint64_t value = 0;
    for (unsigned shift = 0;; shift += 7) {
      const std::uint8_t b = byte(what);
      if (shift == 63 && b > 1) fail_at(start, std::string("bad varint (over 64 bits) in ") + what);
      value |= static_cast<std::uint64_t>(b & 0x7f) << shift;
      if ((b & 0x80) == 0) return value;
    }
  }

  // The next `n` bytes as a cursor of their own (offsets still counted from the stream's start).
  byte_cursor take(std::size_t n, const char* what) {
    if (n > remaining())
      fail(std::string("truncated: ") + what + " claims " + std::to_string(n) + " bytes but " +
           std::to_string(remaining()) + " remain");
    byte_cursor part(bytes_.subspan(at_, n), offset());
    at_ += n;
    return part;
  }

  std::span<const std::byte> rest() const noexcept { return bytes_.subspan(at_); }

 private:
  std::span<const std::byte> bytes_;
  std::size_t base_;
  std::size_t at_ = 0;
};

}  // namespace pmrkit::trace::detail
