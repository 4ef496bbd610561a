#include "span_wire_check.hpp"

#include <google/protobuf/stubs/common.h>  // IsStructurallyValidUTF8, the parser's own check

#include <climits>
#include <cstdint>

namespace pmrkit::protobuf::detail {
namespace {

// The rules below are those of libprotobuf 3.21's parser (parse_context.h and the code protoc
// generates for span.proto). Where this reads differently, the tests in span_wire_check_test.cpp and
// the span_parse fuzzer compare the two.

enum class message_kind { span, sample, tag_entry };
enum class field_kind { other, text, sample, tag_entry };

// What a length-delimited field holds, by its number. A field of any other number, or one
// whose wire type is not the one its type has, is unknown to libprotobuf, which skips it.
field_kind length_field_of(message_kind message, std::uint32_t number) {
  switch (message) {
    case message_kind::span:
      if (number == 8 || number == 13) return field_kind::text;  // service, name
      if (number == 10) return field_kind::sample;               // metrics
      if (number == 11) return field_kind::tag_entry;            // tags
      return field_kind::other;
    case message_kind::sample:
      if (number == 2 || number == 5 || number == 9) return field_kind::text;  // name, message, unit
      if (number == 8) return field_kind::tag_entry;                           // tags
      return field_kind::other;
    case message_kind::tag_entry:  // a map entry: key = 1, value = 2
      return number == 1 || number == 2 ? field_kind::text : field_kind::other;
  }
  return field_kind::other;
}

constexpr std::uint32_t wire_varint = 0;
constexpr std::uint32_t wire_fixed64 = 1;
constexpr std::uint32_t wire_length = 2;
constexpr std::uint32_t wire_start_group = 3;
constexpr std::uint32_t wire_end_group = 4;
constexpr std::uint32_t wire_fixed32 = 5;

// libprotobuf refuses more than 100 nested messages and groups. Allowing a few more here loses
// nothing (it refuses those without reading their strings), where one fewer would refuse
// datagrams it accepts.
constexpr int max_depth = 128;

// The bytes of one message: the datagram, or a submessage's length.
class wire_reader {
 public:
  wire_reader(const unsigned char* begin, const unsigned char* end) : at_(begin), end_(end) {}

  bool at_end() const { return at_ == end_; }

  // At most five bytes; bits past 32 are dropped, as libprotobuf's ReadTag drops them.
  bool tag(std::uint32_t& out) {
    std::uint32_t value = 0;
    for (int i = 0; i < 5 && at_ != end_; ++i) {
      const std::uint32_t byte = *at_++;
      value |= (byte & 0x7f) << (7 * i);
      if (byte < 0x80) {
        out = value;
        return true;
      }
    }
    return false;
  }

  // A value: at most ten bytes.
  bool skip_varint() {
    for (int i = 0; i < 10 && at_ != end_; ++i) {
      if (*at_++ < 0x80) return true;
    }
    return false;
  }

  // A length: at most five bytes, the fifth below 8, and the whole no more than libprotobuf's
  // INT_MAX less its 16 slop bytes.
  bool length(std::uint32_t& out) {
    std::uint32_t value = 0;
    for (int i = 0; i < 5 && at_ != end_; ++i) {
      const std::uint32_t byte = *at_++;
      if (i == 4 && byte >= 8) return false;
      value |= (byte & 0x7f) << (7 * i);
      if (byte < 0x80) {
        out = value;
        return value <= INT_MAX - 16;
      }
    }
    return false;
  }

  // The next `size` bytes, which must lie within this message.
  bool take(std::uint32_t size, wire_reader& taken) {
    if (size > static_cast<std::size_t>(end_ - at_)) return false;
    taken = wire_reader(at_, at_ + size);
    at_ += size;
    return true;
  }

  const char* data() const { return reinterpret_cast<const char*>(at_); }
  int size() const { return static_cast<int>(end_ - at_); }  // a length fits in an int

 private:
  const unsigned char* at_;
  const unsigned char* end_;
};

// libprotobuf's own check, only for text that is not all ASCII: its state machine costs more
// than the rest of this walk on a typical span, and an OR over the bytes vectorizes.
bool is_utf8(const char* text, int size) {
  unsigned char bits = 0;
  for (int i = 0; i < size; ++i) bits |= static_cast<unsigned char>(text[i]);
  return bits < 0x80 || ::google::protobuf::internal::IsStructurallyValidUTF8(text, size);
}

bool skip_unknown(wire_reader& in, std::uint32_t tag, int depth);

// The fields of a group up to its end-group tag, which must carry the group's own number.
bool skip_group(wire_reader& in, std::uint32_t start_tag, int depth) {
  while (!in.at_end()) {
    std::uint32_t tag = 0;
    if (!in.tag(tag)) return false;
    if (tag == 0 || (tag & 7) == wire_end_group) return tag == start_tag + 1;
    if (!skip_unknown(in, tag, depth)) return false;
  }
  return false;
}

bool skip_unknown(wire_reader& in, std::uint32_t tag, int depth) {
  if (tag >> 3 == 0) return false;  // field number 0 is refused
  wire_reader ignored(nullptr, nullptr);
  std::uint32_t size = 0;
  switch (tag & 7) {
    case wire_varint:
      return in.skip_varint();
    case wire_fixed64:
      return in.take(8, ignored);
    case wire_length:
      return in.length(size) && in.take(size, ignored);
    case wire_start_group:
      return depth > 0 && skip_group(in, tag, depth - 1);
    case wire_fixed32:
      return in.take(4, ignored);
    default:  // 6 and 7 are no wire type; an end-group tag was taken by the caller
      return false;
  }
}

bool walk(wire_reader in, message_kind message, int depth) {
  while (!in.at_end()) {
    std::uint32_t tag = 0;
    if (!in.tag(tag)) return false;
    // Tag 0 or an end-group tag ends a message early, which libprotobuf refuses at the top and
    // in a submessage alike.
    if (tag == 0 || (tag & 7) == wire_end_group) return false;
    const field_kind kind =
        (tag & 7) == wire_length ? length_field_of(message, tag >> 3) : field_kind::other;
    if (kind == field_kind::other) {
      if (!skip_unknown(in, tag, depth)) return false;
      continue;
    }
    std::uint32_t size = 0;
    wire_reader field(nullptr, nullptr);
    if (!in.length(size) || !in.take(size, field)) return false;
    switch (kind) {
      case field_kind::text:
        if (!is_utf8(field.data(), field.size())) return false;
        break;
      case field_kind::sample:
        if (depth == 0 || !walk(field, message_kind::sample, depth - 1)) return false;
        break;
      case field_kind::tag_entry:
        if (depth == 0 || !walk(field, message_kind::tag_entry, depth - 1)) return false;
        break;
      case field_kind::other:
        break;
    }
  }
  return true;
}

}  // namespace

bool is_valid_span_wire(std::span<const std::byte> wire) noexcept {
  const auto* begin = reinterpret_cast<const unsigned char*>(wire.data());
  return walk(wire_reader(begin, begin + wire.size()), message_kind::span, max_depth);
}

}  // namespace pmrkit::protobuf::detail
