// Internal: checks a datagram against SSF's schema before libprotobuf parses it. Not installed.
//
// libprotobuf writes an ERROR line to stderr for every proto3 string that is not UTF-8 when it
// parses one, and only global state turns that off (its process-wide log handler, or a
// LogSilencer, which silences every thread while it lives). A daemon fed garbage would write a
// line per datagram. span_parser instead refuses such a datagram before libprotobuf sees it and
// counts it in parse_errors, the counter meant for it.
//
// Thread-safety: a pure function of its argument.
#pragma once

#include <cstddef>
#include <span>

namespace pmrkit::protobuf::detail {

// True when `wire` is a well-formed SSFSpan by libprotobuf's rules (unknown fields of every wire
// type, nested groups, non-minimal varints, repeated and out-of-order fields) and every string
// field of it that libprotobuf checks (a span's service, name and tags; a sample's name,
// message, unit and tags) is UTF-8. False only for bytes libprotobuf's parser refuses as well,
// so nothing it would accept is lost; and on bytes this accepts, every string that libprotobuf
// reads was checked here, so it never logs.
bool is_valid_span_wire(std::span<const std::byte> wire) noexcept;

}  // namespace pmrkit::protobuf::detail
