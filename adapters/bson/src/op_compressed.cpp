#include "pmrkit/bson/op_compressed.hpp"

#include <algorithm>
#include <climits>
#include <cstring>
#include <stdexcept>
#include <string>

#include "byte_order.hpp"

namespace pmrkit::bson {
namespace {

[[noreturn]] void malformed(const std::string& message) {
  throw wire_format_error("OP_COMPRESSED: " + message);
}

std::string compressor_name(std::uint8_t id) {
  switch (id) {
    case compressor_id_noop: return "0 (noop)";
    case compressor_id_snappy: return "1 (snappy)";
    case compressor_id_zlib: return "2 (zlib)";
    case compressor_id_zstd: return "3 (zstd)";
    default: return std::to_string(id);
  }
}

std::string size_disagrees(const op_compressed_header& h, std::size_t produced) {
  return "uncompressedSize is " + std::to_string(h.uncompressed_size) + " but the " +
         compressor_name(h.compressor_id) + " payload holds " + std::to_string(produced) +
         " bytes";
}

// The most bytes a compressor's output for `bytes` of input can take, by compressorId: what
// wrap_op_compressed leaves room for, so that a compressor writes in place and never grows the
// buffer (a growth followed by a throw would leave it in new storage). zstd's is
// ZSTD_COMPRESSBOUND (zstd.h), snappy's MaxCompressedLength, zlib's compressBound; another id,
// the largest of the three.
constexpr std::size_t compressed_room(std::uint8_t compressor_id, std::size_t bytes) noexcept {
  constexpr std::size_t small_input = std::size_t{128} << 10;
  const std::size_t zstd_room =
      bytes + (bytes >> 8) + (bytes < small_input ? (small_input - bytes) >> 11 : 0);
  const std::size_t snappy_room = 32 + bytes + bytes / 6;
  const std::size_t zlib_room = bytes + (bytes >> 12) + (bytes >> 14) + (bytes >> 25) + 13;
  switch (compressor_id) {
    case compressor_id_zstd: return zstd_room;
    case compressor_id_snappy: return snappy_room;
    case compressor_id_zlib: return zlib_room;
    default: return std::max({zstd_room, snappy_room, zlib_room});
  }
}

// Where a call's result is written: `out` when it has room for the `most` bytes the result can
// take, else a copy of it with room for `first` bytes (the call grows it as it needs) that
// replaces it only when the call succeeds (commit()), so that a throw leaves `out` as it was,
// its storage included, not only its size.
class all_or_nothing {
 public:
  all_or_nothing(byte_buffer& out, std::size_t most, std::size_t first)
      : out_(out),
        fits_(out.capacity() - out.size() >= most),
        // At least doubling, as an append grows a buffer, so that messages appended one
        // after another to one buffer copy it a logarithmic number of times.
        larger_(fits_ ? byte_buffer() : out.copy_with_room(std::max(first, out.capacity()))),
        guard_(target()) {}
  byte_buffer& target() noexcept { return fits_ ? out_ : larger_; }
  void commit() noexcept {
    guard_.commit();
    if (!fits_) out_ = std::move(larger_);
  }

 private:
  // Restores the target's size if the scope is left by an exception.
  class rollback {
   public:
    explicit rollback(byte_buffer& target) : target_(target), size_(target.size()) {}
    ~rollback() {
      if (!done_) target_.resize_for_overwrite(size_);
    }
    void commit() noexcept { done_ = true; }

   private:
    byte_buffer& target_;
    std::size_t size_;
    bool done_ = false;
  };

  byte_buffer& out_;
  bool fits_;
  byte_buffer larger_;
  rollback guard_;
};

}  // namespace

std::size_t wrap_op_compressed(std::span<const std::byte> message, std::uint8_t compressor_id,
                               compress_function compress, byte_buffer& out,
                               std::size_t max_message_bytes) {
  // The message is ours to send, so only INT32_MAX bounds its header here. But a receiver
  // refuses an uncompressedSize past its largest message (unwrap_op_compressed does), so the
  // message itself is held to max_message_bytes, and the wrapped result below.
  const message_header header = read_message_header(message, INT32_MAX);
  if (message.size() > max_message_bytes) {
    throw message_too_large("OP_COMPRESSED: the message to wrap is " +
                            std::to_string(message.size()) + " bytes, more than the allowed " +
                            std::to_string(max_message_bytes) + " (a receiver refuses what "
                            "would unwrap to more than its largest message)");
  }
  if (static_cast<std::size_t>(header.message_length) != message.size()) {
    malformed("the message to wrap has messageLength " + std::to_string(header.message_length) +
              " but is " + std::to_string(message.size()) + " bytes");
  }
  const std::int32_t original_opcode = header.op_code;
  if (original_opcode == op_compressed) {
    malformed("the message to wrap is already OP_COMPRESSED (2012)");
  }
  const std::span<const std::byte> body = message.subspan(header_size);
  const std::size_t start = out.size();
  // Our own message, its size known: room for all of it at once.
  const std::size_t most =
      op_compressed_prefix_size + (compressor_id == compressor_id_noop
                                       ? body.size()
                                       : compressed_room(compressor_id, body.size()));
  all_or_nothing result(out, most, most);
  byte_buffer& target = result.target();
  target.resize_for_overwrite(start + op_compressed_prefix_size);
  std::byte* prefix = target.data() + start;
  detail::store_i32(prefix, 0);  // messageLength, below
  std::memcpy(prefix + 4, message.data() + 4, 8);  // requestID and responseTo, as they were
  detail::store_i32(prefix + 12, op_compressed);
  detail::store_i32(prefix + 16, original_opcode);
  detail::store_i32(prefix + 20, static_cast<std::int32_t>(message.size() - header_size));
  prefix[24] = static_cast<std::byte>(compressor_id);
  if (compressor_id == compressor_id_noop) {
    target.append(body);
  } else {
    compress(body, target);
  }
  const std::size_t total = target.size() - start;
  if (total > max_message_bytes || total > static_cast<std::size_t>(INT32_MAX)) {
    throw message_too_large("OP_COMPRESSED: the wrapped message is " + std::to_string(total) +
                            " bytes, more than the allowed " + std::to_string(max_message_bytes));
  }
  detail::store_i32(target.data() + start, static_cast<std::int32_t>(total));
  result.commit();
  return total;
}

op_compressed_header read_op_compressed_header(std::span<const std::byte> message,
                                               std::size_t max_message_bytes) {
  if (message.size() < op_compressed_prefix_size) {
    malformed(std::to_string(message.size()) + " bytes is too short: OP_COMPRESSED needs 25 "
              "(header, originalOpcode, uncompressedSize, compressorId)");
  }
  if (message.size() > max_message_bytes) {
    throw message_too_large("OP_COMPRESSED: the message is " + std::to_string(message.size()) +
                            " bytes, more than the allowed " + std::to_string(max_message_bytes));
  }
  const message_header header = read_message_header(message, max_message_bytes);
  if (static_cast<std::size_t>(header.message_length) != message.size()) {
    malformed("messageLength " + std::to_string(header.message_length) + " disagrees with the " +
              std::to_string(message.size()) + " bytes of the message");
  }
  if (header.op_code != op_compressed) {
    malformed("opCode " + std::to_string(header.op_code) + " is not OP_COMPRESSED (2012)");
  }
  op_compressed_header h;
  h.message_length = header.message_length;
  h.request_id = header.request_id;
  h.response_to = header.response_to;
  h.original_opcode = detail::load_i32(message.data() + header_size);
  h.uncompressed_size = detail::load_i32(message.data() + header_size + 4);
  h.compressor_id = static_cast<std::uint8_t>(message[header_size + 8]);
  if (h.original_opcode == op_compressed) {
    malformed("originalOpcode is 2012 itself: OP_COMPRESSED cannot be nested");
  }
  // The unwrapped message's messageLength is an int32 as well, whatever the caller allows.
  const std::size_t most_bytes =
      std::min(max_message_bytes, static_cast<std::size_t>(INT32_MAX)) - header_size;
  if (h.uncompressed_size < 0 || static_cast<std::size_t>(h.uncompressed_size) > most_bytes) {
    throw message_too_large("OP_COMPRESSED: uncompressedSize " +
                            std::to_string(h.uncompressed_size) + " is out of range: allowed 0.." +
                            std::to_string(most_bytes) +
                            " (the maximum message size, at most 2^31 - 1, less the 16-byte "
                            "header)");
  }
  return h;
}

std::size_t unwrap_op_compressed(std::span<const std::byte> message, std::uint8_t compressor_id,
                                 decompress_function decompress, byte_buffer& out,
                                 std::size_t max_message_bytes) {
  if (max_message_bytes < op_compressed_prefix_size) {
    throw std::invalid_argument("unwrap_op_compressed: max_message_bytes " +
                                std::to_string(max_message_bytes) + " is below the 25 bytes of "
                                "the smallest OP_COMPRESSED message");
  }
  const op_compressed_header h = read_op_compressed_header(message, max_message_bytes);
  const auto uncompressed = static_cast<std::size_t>(h.uncompressed_size);
  const std::span<const std::byte> payload = message.subspan(op_compressed_prefix_size);
  if (h.compressor_id != compressor_id && h.compressor_id != compressor_id_noop) {
    malformed("compressorId " + compressor_name(h.compressor_id) +
              " is not supported: allowed 0 (noop) and " + compressor_name(compressor_id));
  }
  const bool noop = h.compressor_id == compressor_id_noop;
  if (noop && payload.size() != uncompressed) malformed(size_disagrees(h, payload.size()));
  const std::size_t start = out.size();
  // Only the header (and a noop payload, which is here) is this function's to make room for:
  // the decompressor allocates for a frame only once it has checked it against the limit, so
  // uncompressedSize, the sender's word, sizes nothing here (a 30-byte message cannot make
  // this take 48 MB). The caller's buffer is written in place only if the whole message fits
  // in its room: otherwise the decompressor would grow it, freeing its storage, before a frame
  // that produces less than uncompressedSize is found out below. So it works in a copy then.
  const std::size_t ours = header_size + (noop ? payload.size() : 0);
  all_or_nothing result(out, header_size + uncompressed, ours);
  byte_buffer& target = result.target();
  target.resize_for_overwrite(start + header_size);
  std::byte* header = target.data() + start;
  detail::store_i32(header, static_cast<std::int32_t>(header_size + uncompressed));
  detail::store_i32(header + 4, h.request_id);
  detail::store_i32(header + 8, h.response_to);
  detail::store_i32(header + 12, h.original_opcode);
  if (noop) {
    target.append(payload);
  } else {
    // The declared size is the hard limit: a frame claiming or producing more is refused
    // before anything is allocated for it.
    const std::size_t produced = decompress(payload, target, uncompressed);
    if (produced != uncompressed) malformed(size_disagrees(h, produced));
  }
  result.commit();
  return header_size + uncompressed;
}

}  // namespace pmrkit::bson
