// pmrkit/zstd/op_compressed.hpp — MongoDB's OP_COMPRESSED (opCode 2012) with zstd.
//
// OP_COMPRESSED wraps another wire message (typically an OP_MSG): a 16-byte header, then
// originalOpcode (int32), uncompressedSize (int32: the original message without its header),
// compressorId (uint8: 3 = zstd) and the compressed bytes of the original message's body.
// wrap_op_compressed() appends one to a byte_buffer; unwrap_op_compressed() checks one, all its
// lengths first, and appends the original message (its header rebuilt: messageLength,
// requestID, responseTo, originalOpcode) to a byte_buffer, decompressing with the
// uncompressedSize it declares as a hard limit. The result is a complete message for the OP_MSG
// reader (pmrkit::bson::parse_op_msg), which this adapter does not depend on. Pure functions:
// thread-safe as far as the compressor/decompressor and buffers passed in are used by one
// thread. On a throw the output buffer is unchanged.
#pragma once

#include <cstddef>
#include <cstdint>
#include <span>

#include "pmrkit/byte_buffer.hpp"
#include "pmrkit/zstd/compressor.hpp"
#include "pmrkit/zstd/decompressor.hpp"

namespace pmrkit::zstd {

inline constexpr std::int32_t op_compressed_opcode = 2012;
inline constexpr std::uint8_t compressor_id_noop = 0;
inline constexpr std::uint8_t compressor_id_zstd = 3;
inline constexpr std::size_t op_compressed_prefix_size = 16 + 4 + 4 + 1;
inline constexpr std::size_t default_max_message_bytes = 48'000'000;

struct op_compressed_header {
  std::int32_t message_length = 0;
  std::int32_t request_id = 0;
  std::int32_t response_to = 0;
  std::int32_t original_opcode = 0;
  std::int32_t uncompressed_size = 0;  // the original message less its 16-byte header
  std::uint8_t compressor_id = 0;
};

// Appends an OP_COMPRESSED holding `message` (one complete wire message: its messageLength
// must equal its size, and it must not itself be OP_COMPRESSED) to `out`, with the message's
// requestID and responseTo. Returns the bytes appended. Throws malformed_message for such a
// message, message_too_large if the result would exceed max_message_bytes.
std::size_t wrap_op_compressed(std::span<const std::byte> message, compressor& compressor,
                               byte_buffer& out,
                               std::size_t max_message_bytes = default_max_message_bytes);

// Reads and checks the fixed part of an OP_COMPRESSED message: at least 25 bytes,
// messageLength equal to message.size() and at most max_message_bytes, opCode 2012, an
// originalOpcode other than 2012, uncompressedSize from 0 to max_message_bytes - 16. Throws
// malformed_message or message_too_large.
op_compressed_header read_op_compressed_header(
    std::span<const std::byte> message, std::size_t max_message_bytes = default_max_message_bytes);

// Appends the original message to `out` and returns its size. compressorId 3 (zstd) and 0
// (noop) are accepted; others throw malformed_message naming them. Throws like
// read_op_compressed_header, malformed_message when the content does not decompress to exactly
// uncompressedSize bytes (corrupt_frame / output_limit_exceeded from the decompressor are passed
// on as they are).
std::size_t unwrap_op_compressed(std::span<const std::byte> message, decompressor& decompressor,
                                 byte_buffer& out,
                                 std::size_t max_message_bytes = default_max_message_bytes);

}  // namespace pmrkit::zstd
