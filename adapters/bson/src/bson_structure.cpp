#include "bson_structure.hpp"

#include <cstdint>
#include <cstdio>
#include <string>

#include "byte_order.hpp"
#include "pmrkit/bson/op_msg_reader.hpp"

namespace pmrkit::bson {
namespace detail {
namespace {

class walker {
 public:
  walker(const std::byte* base, std::size_t max_nesting, const char* what)
      : base_(base), max_nesting_(max_nesting), what_(what) {}

  // Returns the length of the document at `begin`, which must end by `limit`.
  std::size_t document(std::size_t begin, std::size_t limit, std::size_t depth, bool elements) {
    if (depth > max_nesting_) {
      fail(begin, "nesting is deeper than the allowed " + std::to_string(max_nesting_) +
                      " levels");
    }
    if (limit < begin || limit - begin < 5) {
      fail(begin, "a document needs at least 5 bytes, " +
                      std::to_string(limit < begin ? 0 : limit - begin) + " are left");
    }
    const std::int32_t declared = load_i32(base_ + begin);
    if (declared < 5 || static_cast<std::size_t>(declared) > limit - begin) {
      fail(begin, "document length " + std::to_string(declared) + " is out of range: allowed 5.." +
                      std::to_string(limit - begin) + " (the bytes that contain it)");
    }
    const std::size_t end = begin + static_cast<std::size_t>(declared);
    if (base_[end - 1] != std::byte{0}) {
      fail(end - 1, "document of length " + std::to_string(declared) +
                        " does not end with its 0x00 terminator");
    }
    if (elements) walk_elements(begin + 4, end - 1, depth);
    return static_cast<std::size_t>(declared);
  }

 private:
  // Elements occupy [pos, last); base_[last] is the document's terminator.
  void walk_elements(std::size_t pos, std::size_t last, std::size_t depth) {
    while (pos < last) {
      const auto type = static_cast<std::uint8_t>(base_[pos]);
      if (type == 0) {
        fail(pos, "element type 0x00 (the terminator) appears before the document's end at " +
                      std::to_string(last));
      }
      const std::size_t type_at = pos++;
      pos = cstring_end(pos, last, "element key") + 1;
      pos = value(type, type_at, pos, last, depth);
    }
  }

  // Returns the offset just past the value of an element of `type` starting at pos.
  std::size_t value(std::uint8_t type, std::size_t type_at, std::size_t pos, std::size_t last,
                    std::size_t depth) {
    switch (type) {
      case 0x01:  // double
      case 0x09:  // UTC datetime
      case 0x11:  // timestamp
      case 0x12:  // int64
        return fixed(pos, last, 8);
      case 0x10:  // int32
        return fixed(pos, last, 4);
      case 0x07:  // ObjectId
        return fixed(pos, last, 12);
      case 0x13:  // decimal128
        return fixed(pos, last, 16);
      case 0x06:  // undefined
      case 0x0A:  // null
      case 0x7F:  // max key
      case 0xFF:  // min key
        return pos;
      case 0x08: {  // boolean
        const std::size_t end = fixed(pos, last, 1);
        const auto v = static_cast<std::uint8_t>(base_[pos]);
        if (v > 1) fail(pos, "boolean value " + std::to_string(v) + " is not 0 or 1");
        return end;
      }
      case 0x02:  // string
      case 0x0D:  // JavaScript code
      case 0x0E:  // symbol
        return string(pos, last);
      case 0x03:  // embedded document
      case 0x04:  // array
        return pos + document(pos, last, depth + 1, true);
      case 0x05: {  // binary
        need(pos, last, 5, "binary length and subtype");
        const std::int32_t length = load_i32(base_ + pos);
        if (length < 0 || static_cast<std::size_t>(length) > last - pos - 5) {
          fail(pos, "binary length " + std::to_string(length) + " is out of range: allowed 0.." +
                        std::to_string(last - pos - 5));
        }
        if (static_cast<std::uint8_t>(base_[pos + 4]) == 0x02) {
          // The old binary subtype repeats the length inside the payload.
          if (length < 4 || load_i32(base_ + pos + 5) != length - 4) {
            fail(pos, "binary subtype 0x02 must start with its own length (total - 4)");
          }
        }
        return pos + 5 + static_cast<std::size_t>(length);
      }
      case 0x0B: {  // regular expression: pattern and options, two cstrings
        pos = cstring_end(pos, last, "regular expression pattern") + 1;
        return cstring_end(pos, last, "regular expression options") + 1;
      }
      case 0x0C:  // DBPointer: string, then an ObjectId
        return fixed(string(pos, last), last, 12);
      case 0x0F: {  // code with scope: int32 total, string, document
        need(pos, last, 4, "code-with-scope length");
        const std::int32_t total = load_i32(base_ + pos);
        if (total < 14 || static_cast<std::size_t>(total) > last - pos) {
          fail(pos, "code-with-scope length " + std::to_string(total) +
                        " is out of range: allowed 14.." + std::to_string(last - pos));
        }
        const std::size_t end = pos + static_cast<std::size_t>(total);
        const std::size_t scope = string(pos + 4, end);
        if (scope + document(scope, end, depth + 1, true) != end) {
          fail(pos, "code-with-scope length " + std::to_string(total) +
                        " disagrees with the code and scope it contains");
        }
        return end;
      }
      default: {
        char hex[8];
        std::snprintf(hex, sizeof hex, "0x%02X", static_cast<unsigned>(type));
        fail(type_at, std::string("unknown element type ") + hex);
      }
    }
  }

  std::size_t fixed(std::size_t pos, std::size_t last, std::size_t bytes) {
    need(pos, last, bytes, "element value");
    return pos + bytes;
  }

  // A length-prefixed string (length counts its 0x00 terminator).
  std::size_t string(std::size_t pos, std::size_t last) {
    need(pos, last, 4, "string length");
    const std::int32_t length = load_i32(base_ + pos);
    if (length < 1 || static_cast<std::size_t>(length) > last - pos - 4) {
      fail(pos, "string length " + std::to_string(length) + " is out of range: allowed 1.." +
                    std::to_string(last - pos - 4));
    }
    const std::size_t end = pos + 4 + static_cast<std::size_t>(length);
    if (base_[end - 1] != std::byte{0}) fail(end - 1, "string does not end with 0x00");
    return end;
  }

  // The offset of the 0x00 ending a cstring that starts at pos and must end before `last`.
  std::size_t cstring_end(std::size_t pos, std::size_t last, const char* what) {
    for (std::size_t i = pos; i < last; ++i)
      if (base_[i] == std::byte{0}) return i;
    fail(pos, std::string(what) + " is not terminated by 0x00 before the document ends");
  }

  void need(std::size_t pos, std::size_t last, std::size_t bytes, const char* what) {
    if (pos > last || last - pos < bytes) {
      fail(pos, std::string(what) + " needs " + std::to_string(bytes) + " bytes, " +
                    std::to_string(pos > last ? 0 : last - pos) + " are left in the document");
    }
  }

  [[noreturn]] void fail(std::size_t offset, const std::string& message) const {
    throw wire_format_error(std::string(what_) + ", offset " + std::to_string(offset) + ": " +
                            message);
  }

  const std::byte* base_;
  std::size_t max_nesting_;
  const char* what_;
};

}  // namespace

std::size_t check_document(const std::byte* base, std::size_t begin, std::size_t limit,
                           bool elements, std::size_t max_nesting, const char* what) {
  return walker(base, max_nesting, what).document(begin, limit, 0, elements);
}

}  // namespace detail

void validate_document(std::span<const std::byte> document, std::size_t max_nesting) {
  if (max_nesting > detail::max_nesting_limit) {
    throw std::invalid_argument("validate_document: max_nesting " + std::to_string(max_nesting) +
                                " is too large: allowed 0.." +
                                std::to_string(detail::max_nesting_limit));
  }
  const std::size_t length = detail::check_document(document.data(), 0, document.size(), true,
                                                    max_nesting, "BSON document");
  if (length != document.size()) {
    throw wire_format_error("BSON document: its length prefix says " + std::to_string(length) +
                            " bytes but " + std::to_string(document.size()) + " were given");
  }
}

}  // namespace pmrkit::bson
