// Internal: checks a datagram against SSF's schema before libprotobuf parses it. Not installed.
//
// libprotobuf writes an ERROR line to stderr for every proto3 string that is not UTF-8 when it
// parses one, and only global state turns that off (its process-wide log handler, or a
// LogSilencer, which silences every thread while it lives). A daemon fed garbage would write a
// line per datagram. span_parser instead refuses such a datagram before libprotobuf sees it and
// counts it in parse_errors, the counter meant for it.
//
// It also tells a span with unknown fields apart (a newer sender's), so that the parser can drop
// them first: libprotobuf keeps them on the process heap, arena or not.
//
// Thread-safety: pure functions of their arguments.
#pragma once

#include <cstddef>
#include <span>

namespace pmrkit::protobuf::detail {

enum class span_wire {
  // Not a span libprotobuf would parse: malformed, or a string it checks is not UTF-8.
  refused,
  valid,
  // Valid, with fields the span or a sample does not have (a newer sender's), which
  // libprotobuf would keep in an unknown-field set on the process heap, arena or not.
  valid_with_unknown_fields,
};

// Refused exactly when libprotobuf's parser refuses the bytes, so nothing it would accept is lost,
// nor parsed that it would not; and on bytes not refused, every string that libprotobuf reads was
// checked here (a span's service, name and tags; a sample's name, message, unit and tags), so it
// never logs. The rules are libprotobuf's: unknown fields of every wire type, nested groups,
// non-minimal varints, repeated and out-of-order fields.
span_wire check_span_wire(std::span<const std::byte> wire) noexcept;

// For bytes check_span_wire() found valid_with_unknown_fields: writes them to `out` (room for
// wire.size() bytes; what is written is never longer) without the fields libprotobuf would
// not read into the span, at every level, and returns the size written. libprotobuf parses the
// result into the same span, with nothing to keep on the heap.
std::size_t copy_without_unknown_fields(std::span<const std::byte> wire,
                                        std::byte* out) noexcept;

}  // namespace pmrkit::protobuf::detail
