// pmrkit/bson/wire_format.hpp — the MongoDB wire protocol's message header and its limits.
//
// Every MongoDB message starts with a 16-byte little-endian header; OP_MSG (2013) carries
// commands and OP_COMPRESSED (2012) wraps another message. This is the one place pmrkit knows
// the header: the OP_MSG writer (insert_message.hpp) and reader (op_msg_reader.hpp) and the
// OP_COMPRESSED framing (op_compressed.hpp) all build on it. This header has no libbson in it and
// holds no state: the functions are pure and safe to call from any thread. Spans are borrowed.
#pragma once

#include <cstddef>
#include <cstdint>
#include <span>
#include <stdexcept>
#include <string>

namespace pmrkit::bson {

inline constexpr std::int32_t op_msg = 2013;
inline constexpr std::int32_t op_compressed = 2012;
inline constexpr std::size_t header_size = 16;
// The server's defaults (hello: maxMessageSizeBytes, maxBsonObjectSize).
inline constexpr std::size_t default_max_message_bytes = 48'000'000;
inline constexpr std::size_t default_max_document_bytes = 16 * 1024 * 1024;
// A command document may exceed that by 16 KiB of command overhead in OP_MSG.
inline constexpr std::size_t max_command_document_bytes = default_max_document_bytes + 16 * 1024;

// OP_MSG flagBits. Bits 0-15 are "required": a reader must reject a message that sets one it
// does not know.
inline constexpr std::uint32_t flag_checksum_present = 1u << 0;
inline constexpr std::uint32_t flag_more_to_come = 1u << 1;
inline constexpr std::uint32_t flag_exhaust_allowed = 1u << 16;

struct message_header {
  std::int32_t message_length = 0;  // the whole message, this header included
  std::int32_t request_id = 0;
  std::int32_t response_to = 0;
  std::int32_t op_code = 0;
};

// Input that is not a well-formed message: the what() names the offending field, its offset and
// what is allowed.
class wire_format_error : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

// A message, or a document in one, larger than the configured maximum: insert_message refuses
// it (leaving the message as it was), OP_COMPRESSED refuses to produce or accept it.
class message_too_large : public std::length_error {
 public:
  using std::length_error::length_error;
};

// Reads the header at the start of `prefix` (at least 16 bytes) and checks that messageLength
// lies between 16 and `max_message_bytes`; use it to learn how many bytes of a stream make up
// the message. Throws wire_format_error otherwise.
message_header read_message_header(std::span<const std::byte> prefix,
                                   std::size_t max_message_bytes = default_max_message_bytes);

// Writes `header` into the first 16 bytes of `out` (which must hold at least 16 bytes).
void write_message_header(std::span<std::byte> out, const message_header& header);

// CRC-32C (Castagnoli), the checksum OP_MSG appends when flag_checksum_present is set.
std::uint32_t crc32c(std::span<const std::byte> bytes) noexcept;

}  // namespace pmrkit::bson
