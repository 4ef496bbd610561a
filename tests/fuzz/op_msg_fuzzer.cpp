// Fuzz target: MongoDB wire messages as a server or proxy would receive them. The input is
// read both as an OP_MSG (parse_op_msg) and as an OP_COMPRESSED (unwrap_op_compressed with the
// zstd adapter's decompressor passed in, then parse_op_msg on what it yields); both are the bson
// adapter's. Each must succeed or throw its documented error (wire_format_error,
// message_too_large; zstd::error and its subclasses from the decompressor; std::bad_alloc only
// from the bounded upstream). What succeeds must hold up:
//  - every document of a parsed OP_MSG lies inside the message and validates again on its own;
//  - unwrap output is exactly 16 + uncompressedSize bytes with a consistent header; on a throw
//    the output buffer is unchanged, its storage included;
//  - a parsed OP_MSG wrapped into OP_COMPRESSED unwraps to the same bytes.
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <new>
#include <span>
#include <stdexcept>

#include "fuzz_support.hpp"
#include "pmrkit/bson/op_compressed.hpp"
#include "pmrkit/bson/op_msg_reader.hpp"
#include "pmrkit/byte_buffer.hpp"
#include "pmrkit/zstd/compressor.hpp"
#include "pmrkit/zstd/decompressor.hpp"
#include "pmrkit/zstd/errors.hpp"

namespace {

using pmrkit::bson::compressor_id_zstd;
using pmrkit::fuzz::broken;
constexpr std::size_t max_message = 1 << 20;  // keeps fuzzed sizes from exhausting memory

bool inside(std::span<const std::byte> part, std::span<const std::byte> whole) {
  return part.data() >= whole.data() && part.data() + part.size() <= whole.data() + whole.size();
}

// Returns true if `message` parsed as an OP_MSG.
bool check_op_msg(std::span<const std::byte> message) {
  pmrkit::bson::reader_limits limits;
  limits.max_message_bytes = max_message;
  pmrkit::bson::op_msg_view view;
  try {
    view = pmrkit::bson::parse_op_msg(message, limits);
  } catch (const pmrkit::bson::wire_format_error&) {
    return false;
  }
  if (view.bytes().size() != message.size()) broken("op_msg_view does not cover the message");
  if (!inside(view.body(), message)) broken("the body lies outside the message");
  pmrkit::bson::validate_document(view.body(), limits.max_nesting);
  for (std::size_t i = 0; i < view.sequence_count(); ++i) {
    const auto sequence = view.sequence(i);
    std::size_t count = 0;
    for (const auto document : sequence.documents) {
      if (!inside(document, message)) broken("a document lies outside the message");
      pmrkit::bson::validate_document(document, limits.max_nesting);  // throws: broken promise
      ++count;
    }
    if (count != sequence.documents.count()) broken("document_range count disagrees");
  }
  return true;
}

// Its bytes, and its storage too: a pointer into the buffer must stay good.
void unchanged(const pmrkit::byte_buffer& out, const std::byte (&marker)[3],
               const std::byte* storage, std::size_t capacity) {
  if (out.size() != sizeof marker || std::memcmp(out.data(), marker, sizeof marker) != 0)
    broken("a failed unwrap changed its output buffer");
  if (out.data() != storage || out.capacity() != capacity)
    broken("a failed unwrap moved its output buffer's storage");
}

struct codecs {
  pmrkit::zstd::compressor compressor{std::pmr::new_delete_resource(),
                                      {.level = 1, .window_log = 10}};
  pmrkit::zstd::decompressor decompressor{std::pmr::new_delete_resource(),
                                          {.max_output_bytes = max_message, .max_window_log = 20}};
};

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  // Contexts are built once: zstd's are large, and the target is about the parsers.
  static codecs z;
  const std::span<const std::byte> input(reinterpret_cast<const std::byte*>(data), size);
  pmrkit::fuzz::bounded_upstream upstream;
  {
    const bool is_op_msg = check_op_msg(input);

    // Room for the 16-byte header and a small message: unwrap writes in place when the whole
    // message fits, and must not then grow the buffer before the frame has proved its size.
    pmrkit::byte_buffer out = pmrkit::byte_buffer::make_standalone(&upstream, 64);
    const std::byte marker[3] = {std::byte{1}, std::byte{2}, std::byte{3}};
    out.append(marker, sizeof marker);
    const std::byte* const storage = out.data();
    const std::size_t capacity = out.capacity();
    try {
      const std::size_t n = pmrkit::bson::unwrap_op_compressed(input, compressor_id_zstd,
                                                               z.decompressor, out, max_message);
      if (out.size() != sizeof marker + n) broken("unwrap returned a size it did not append");
      const auto h = pmrkit::bson::read_op_compressed_header(input, max_message);
      if (n != 16 + static_cast<std::size_t>(h.uncompressed_size))
        broken("unwrap size != 16 + uncompressedSize");
      std::int32_t length, opcode;
      std::memcpy(&length, out.data() + sizeof marker, 4);
      std::memcpy(&opcode, out.data() + sizeof marker + 12, 4);
      if (static_cast<std::size_t>(length) != n || opcode != h.original_opcode)
        broken("the rebuilt header disagrees with the OP_COMPRESSED prefix");
      check_op_msg(out.span().subspan(sizeof marker));
    } catch (const pmrkit::bson::wire_format_error&) {
      unchanged(out, marker, storage, capacity);
    } catch (const pmrkit::bson::message_too_large&) {
      unchanged(out, marker, storage, capacity);
    } catch (const pmrkit::zstd::error&) {
      unchanged(out, marker, storage, capacity);
    } catch (const std::bad_alloc&) {
      unchanged(out, marker, storage, capacity);
    }

    if (is_op_msg) {
      pmrkit::byte_buffer wrapped = pmrkit::byte_buffer::make_standalone(&upstream, 64);
      pmrkit::byte_buffer unwrapped = pmrkit::byte_buffer::make_standalone(&upstream, 64);
      try {
        pmrkit::bson::wrap_op_compressed(input, compressor_id_zstd, z.compressor, wrapped,
                                         max_message + 64);
        pmrkit::bson::unwrap_op_compressed(wrapped.span(), compressor_id_zstd, z.decompressor,
                                           unwrapped, max_message + 64);
      } catch (const pmrkit::bson::wire_format_error&) {
        broken("a valid OP_MSG could not be wrapped and unwrapped");
      } catch (const pmrkit::bson::message_too_large&) {
        broken("a valid OP_MSG could not be wrapped and unwrapped");
      } catch (const pmrkit::zstd::error&) {
        broken("a valid OP_MSG could not be wrapped and unwrapped");
      }
      if (unwrapped.size() != input.size() ||
          std::memcmp(unwrapped.data(), input.data(), input.size()) != 0)
        broken("OP_COMPRESSED round trip changed the message");
    }
  }
  if (upstream.blocks_in_use() != 0) broken("a buffer kept memory after it was destroyed");
  return 0;
}
