#include "span_wire_check.hpp"

#include <google/protobuf/stubs/common.h>  // IsStructurallyValidUTF8, the parser's own check

#include <climits>
#include <cstdint>
#include <cstring>

namespace pmrkit::protobuf::detail {
namespace {

// The rules below are those of libprotobuf 3.21's parser (parse_context.h and the code protoc
// generates for span.proto). Where this reads differently, the tests in span_wire_check_test.cpp
// and the span_parse fuzzer compare the two.

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
      if (number == 2 || number == 5 || number == 9) {
        return field_kind::text;  // name, message, unit
      }
      if (number == 8) return field_kind::tag_entry;  // tags
      return field_kind::other;
    case message_kind::tag_entry:  // a map entry: key = 1, value = 2
      return number == 1 || number == 2 ? field_kind::text : field_kind::other;
  }
  return field_kind::other;
}

// A field libprotobuf reads into the message with a wire type other than length-delimited: the
// integers, enums and booleans as varints, the floats as fixed32. With any other wire type, or
// under a number the message does not have, a field is unknown.
bool is_known_scalar(message_kind message, std::uint32_t tag);

constexpr std::uint32_t wire_varint = 0;
constexpr std::uint32_t wire_fixed64 = 1;
constexpr std::uint32_t wire_length = 2;
constexpr std::uint32_t wire_start_group = 3;
constexpr std::uint32_t wire_end_group = 4;
constexpr std::uint32_t wire_fixed32 = 5;

bool is_known_scalar(message_kind message, std::uint32_t tag) {
  const std::uint32_t number = tag >> 3;
  const std::uint32_t wire_type = tag & 7;
  switch (message) {
    case message_kind::span:  // version, trace_id, id, parent_id, start/end, error, indicator
      return wire_type == wire_varint && ((number >= 1 && number <= 7) || number == 12);
    case message_kind::sample:  // metric, timestamp, status; value and sample_rate as floats
      if (number == 3 || number == 7) return wire_type == wire_fixed32;
      return wire_type == wire_varint && (number == 1 || number == 4 || number == 6);
    case message_kind::tag_entry:
      return false;
  }
  return false;
}

// libprotobuf refuses more than 100 nested messages and groups, and so does this, exactly: one
// level fewer would refuse datagrams it accepts, and one more would let the parser accept, in
// its copy without unknown fields, unknown groups nested deeper than libprotobuf parses.
constexpr int max_depth = 100;

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
  const unsigned char* position() const { return at_; }

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

// Checks one message; sets `unknown_fields` if the span or a sample has a field libprotobuf
// would keep as unknown (a tag entry's it drops as it parses).
bool walk(wire_reader in, message_kind message, int depth, bool& unknown_fields) {
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
      if (message != message_kind::tag_entry && !is_known_scalar(message, tag)) {
        unknown_fields = true;
      }
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
        if (depth == 0 || !walk(field, message_kind::sample, depth - 1, unknown_fields)) {
          return false;
        }
        break;
      case field_kind::tag_entry:
        if (depth == 0 || !walk(field, message_kind::tag_entry, depth - 1, unknown_fields)) {
          return false;
        }
        break;
      case field_kind::other:
        break;
    }
  }
  return true;
}

// The wire format's varint of `value`: bytes written to `out`, or counted when out is null.
std::size_t put_varint(std::uint64_t value, unsigned char* out) {
  std::size_t n = 1;
  for (; value >= 0x80; value >>= 7, ++n) {
    if (out != nullptr) *out++ = static_cast<unsigned char>(value | 0x80);
  }
  if (out != nullptr) *out = static_cast<unsigned char>(value);
  return n;
}

// `in`'s known fields, its unknown ones dropped, submessages written again without theirs:
// written to `out`, or only counted when out is null. `in` was checked by walk(), so every
// read succeeds.
std::size_t write_known(wire_reader in, message_kind message, unsigned char* out) {
  std::size_t written = 0;
  const auto copy = [&](const unsigned char* from, const unsigned char* to) {
    if (out != nullptr) std::memcpy(out + written, from, static_cast<std::size_t>(to - from));
    written += static_cast<std::size_t>(to - from);
  };
  while (!in.at_end()) {
    const unsigned char* const field_start = in.position();
    std::uint32_t tag = 0;
    in.tag(tag);
    const field_kind kind =
        (tag & 7) == wire_length ? length_field_of(message, tag >> 3) : field_kind::other;
    if (kind == field_kind::other) {
      skip_unknown(in, tag, max_depth);
      if (is_known_scalar(message, tag)) copy(field_start, in.position());
      continue;
    }
    const unsigned char* const tag_end = in.position();
    std::uint32_t size = 0;
    wire_reader field(nullptr, nullptr);
    in.length(size);
    in.take(size, field);
    if (kind == field_kind::text) {
      copy(field_start, in.position());
      continue;
    }
    const message_kind inner =
        kind == field_kind::sample ? message_kind::sample : message_kind::tag_entry;
    const std::size_t inner_size = write_known(field, inner, nullptr);
    copy(field_start, tag_end);
    written += put_varint(inner_size, out != nullptr ? out + written : nullptr);
    written += write_known(field, inner, out != nullptr ? out + written : nullptr);
  }
  return written;
}

wire_reader reader_of(std::span<const std::byte> wire) {
  const auto* begin = reinterpret_cast<const unsigned char*>(wire.data());
  return {begin, begin + wire.size()};
}

}  // namespace

span_wire check_span_wire(std::span<const std::byte> wire) noexcept {
  bool unknown_fields = false;
  if (!walk(reader_of(wire), message_kind::span, max_depth, unknown_fields)) {
    return span_wire::refused;
  }
  return unknown_fields ? span_wire::valid_with_unknown_fields : span_wire::valid;
}

std::size_t copy_without_unknown_fields(std::span<const std::byte> wire,
                                        std::byte* out) noexcept {
  return write_known(reader_of(wire), message_kind::span, reinterpret_cast<unsigned char*>(out));
}

}  // namespace pmrkit::protobuf::detail
