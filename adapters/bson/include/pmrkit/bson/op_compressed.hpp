// pmrkit/bson/op_compressed.hpp — MongoDB's OP_COMPRESSED (opCode 2012), with the compressor
// passed in.
//
// OP_COMPRESSED wraps another wire message (typically an OP_MSG): a 16-byte header, then
// originalOpcode (int32), uncompressedSize (int32: the original message without its header),
// compressorId (uint8) and the compressed bytes of the original message's body.
// wrap_op_compressed() appends one to a byte_buffer; unwrap_op_compressed() checks one, all its
// lengths first, and appends the original message (its header rebuilt: messageLength,
// requestID, responseTo, originalOpcode) to a byte_buffer, ready for parse_op_msg().
//
// The framing knows no compression library: the caller passes the compression in, either as
// a function (compress_function / decompress_function) or as an object with the member
// functions named there — a pmrkit::zstd::compressor, compressor_pool or decompressor fits as
// it is, with compressor_id_zstd:
//     bson::wrap_op_compressed(message, bson::compressor_id_zstd, zstd_compressor, out);
//     bson::unwrap_op_compressed(wrapped, bson::compressor_id_zstd, zstd_decompressor, out);
// compressorId 0 (noop) is handled here and needs no compressor.
//
// Pure functions: thread-safe as far as the compressor and buffers passed in are used by one
// thread. On a throw the output buffer is exactly as it was, its capacity and storage (data())
// included: a result that needs more room is written into a larger copy that replaces the
// buffer on success. For that, wrap leaves room for the worst case of the compressorId's
// format (zstd's ZSTD_compressBound, snappy's, zlib's; the largest for another id), and a
// decompressor must itself leave its buffer as it was when it throws (the contract of
// decompress_function below; pmrkit::zstd::decompressor does). Errors: wire_format_error for
// framing that is wrong (lengths, opcodes, compressor id, a payload that does not decompress
// to exactly uncompressedSize bytes), message_too_large beyond max_message_bytes, and what the
// compressor or decompressor throws, passed on as it is.
#pragma once

#include <concepts>
#include <cstddef>
#include <cstdint>
#include <span>

#include "pmrkit/bson/wire_format.hpp"
#include "pmrkit/byte_buffer.hpp"
#include "pmrkit/function_ref.hpp"

namespace pmrkit::bson {

// compressorId values MongoDB assigns.
inline constexpr std::uint8_t compressor_id_noop = 0;
inline constexpr std::uint8_t compressor_id_snappy = 1;
inline constexpr std::uint8_t compressor_id_zlib = 2;
inline constexpr std::uint8_t compressor_id_zstd = 3;
// The fixed part: header, originalOpcode, uncompressedSize, compressorId.
inline constexpr std::size_t op_compressed_prefix_size = header_size + 4 + 4 + 1;

struct op_compressed_header {
  std::int32_t message_length = 0;
  std::int32_t request_id = 0;
  std::int32_t response_to = 0;
  std::int32_t original_opcode = 0;
  std::int32_t uncompressed_size = 0;  // the original message less its 16-byte header
  std::uint8_t compressor_id = 0;
};

// Appends the compressed form of `source` to `destination` and returns the bytes appended.
using compress_function =
    function_ref<std::size_t(std::span<const std::byte> source, byte_buffer& destination)>;
// Appends what `source` decompresses to, and returns the bytes appended; it must throw, and
// append nothing, rather than produce more than `max_output` bytes. When it throws it leaves
// `destination` exactly as it was, its storage (data()) included: grow a copy, not the buffer.
using decompress_function = function_ref<std::size_t(
    std::span<const std::byte> source, byte_buffer& destination, std::size_t max_output)>;

template <class Compressor>
concept message_compressor =
    requires(Compressor& c, std::span<const std::byte> source, byte_buffer& destination) {
      { c.compress(source, destination) } -> std::convertible_to<std::size_t>;
    };

template <class Decompressor>
concept message_decompressor = requires(Decompressor& d, std::span<const std::byte> source,
                                        byte_buffer& destination, std::size_t max_output) {
  { d.decompress(source, destination, max_output) } -> std::convertible_to<std::size_t>;
};

// Appends an OP_COMPRESSED holding `message` (one complete wire message: its messageLength
// must equal its size, and it must not itself be OP_COMPRESSED) to `out`, with the message's
// requestID and responseTo, compressorId `compressor_id`, and the body compressed by
// `compress` (with compressor_id_noop the body is copied as it is and `compress` is not
// called). Returns the bytes appended. Throws wire_format_error for such a message,
// message_too_large if the message or the result would exceed max_message_bytes (a receiver
// refuses what would unwrap to more).
std::size_t wrap_op_compressed(std::span<const std::byte> message, std::uint8_t compressor_id,
                               compress_function compress, byte_buffer& out,
                               std::size_t max_message_bytes = default_max_message_bytes);

template <message_compressor Compressor>
std::size_t wrap_op_compressed(std::span<const std::byte> message, std::uint8_t compressor_id,
                               Compressor& compressor, byte_buffer& out,
                               std::size_t max_message_bytes = default_max_message_bytes) {
  auto compress = [&compressor](std::span<const std::byte> source, byte_buffer& destination) {
    return static_cast<std::size_t>(compressor.compress(source, destination));
  };
  return wrap_op_compressed(message, compressor_id, compress_function(compress), out,
                            max_message_bytes);
}

// Reads and checks the fixed part of an OP_COMPRESSED message: at least 25 bytes,
// messageLength equal to message.size() and at most max_message_bytes, opCode 2012, an
// originalOpcode other than 2012, uncompressedSize from 0 to max_message_bytes - 16 (and at
// most INT32_MAX - 16, since the unwrapped message's messageLength is an int32). Throws
// wire_format_error or message_too_large.
op_compressed_header read_op_compressed_header(
    std::span<const std::byte> message, std::size_t max_message_bytes = default_max_message_bytes);

// Appends the original message to `out` and returns its size. The message's compressorId must
// be `compressor_id` (whose payload `decompress` reads, with uncompressedSize as its hard
// limit) or 0 (noop); another throws wire_format_error naming it. Throws like
// read_op_compressed_header, and wire_format_error when the payload does not decompress to
// exactly uncompressedSize bytes.
std::size_t unwrap_op_compressed(std::span<const std::byte> message, std::uint8_t compressor_id,
                                 decompress_function decompress, byte_buffer& out,
                                 std::size_t max_message_bytes = default_max_message_bytes);

template <message_decompressor Decompressor>
std::size_t unwrap_op_compressed(std::span<const std::byte> message, std::uint8_t compressor_id,
                                 Decompressor& decompressor, byte_buffer& out,
                                 std::size_t max_message_bytes = default_max_message_bytes) {
  auto decompress = [&decompressor](std::span<const std::byte> source, byte_buffer& destination,
                                    std::size_t max_output) {
    return static_cast<std::size_t>(decompressor.decompress(source, destination, max_output));
  };
  return unwrap_op_compressed(message, compressor_id, decompress_function(decompress), out,
                              max_message_bytes);
}

}  // namespace pmrkit::bson
