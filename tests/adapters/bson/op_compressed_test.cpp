// OP_COMPRESSED framing: the layout matches the wire protocol, wrapping and unwrapping give back
// the original message byte for byte (and an OP_MSG the reader accepts), every inconsistent
// field is rejected without touching the output buffer, and the compressor passed in is the
// only one used. The framing is tested with a trivial test codec (so it needs no compression
// library) and, when pmrkit::zstd is built, with zstd's compressor and decompressor as they are,
// checked against the zstd command-line tool.
#include <catch2/catch.hpp>

#include <cstring>
#include <random>
#include <stdexcept>
#include <string>
#include <string_view>
#include <vector>

#include "pmrkit/bson/document.hpp"
#include "pmrkit/bson/insert_message.hpp"
#include "pmrkit/bson/op_compressed.hpp"
#include "pmrkit/bson/op_msg_reader.hpp"
#include "pmrkit/counting_resource.hpp"
#include "pmrkit/buffer_pool.hpp"

#ifdef PMRKIT_TEST_HAVE_ZSTD
#include "pmrkit/zstd/compressor.hpp"
#include "pmrkit/zstd/decompressor.hpp"
#include "pmrkit/zstd/errors.hpp"
#include "zstd_test_support.hpp"
#endif

namespace {

using bytes = std::vector<std::byte>;
using pmrkit::bson::message_too_large;
using pmrkit::bson::wire_format_error;

// A stand-in compression (id 200, unassigned by MongoDB): every byte XOR 0x5A, one byte out
// per byte in, so sizes are known; decompression refuses to exceed its limit, as required.
constexpr std::uint8_t test_codec_id = 200;

class codec_limit_error : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

struct xor_codec {
  int compress_calls = 0;
  std::size_t compress(std::span<const std::byte> source, pmrkit::byte_buffer& destination) {
    ++compress_calls;
    for (std::byte b : source) {
      const std::byte x = b ^ std::byte{0x5A};
      destination.append(&x, 1);
    }
    return source.size();
  }
  std::size_t decompress(std::span<const std::byte> source, pmrkit::byte_buffer& destination,
                         std::size_t max_output) {
    if (source.size() > max_output) throw codec_limit_error("xor_codec: over the limit");
    for (std::byte b : source) {
      const std::byte x = b ^ std::byte{0x5A};
      destination.append(&x, 1);
    }
    return source.size();
  }
};

// Compresses a body of zeros to its length (eight bytes): a codec whose output is far smaller
// than its input, with no compression library.
struct zeros_codec {
  std::size_t compress(std::span<const std::byte> source, pmrkit::byte_buffer& destination) {
    for (std::byte b : source) REQUIRE(b == std::byte{0});
    const std::uint64_t size = source.size();
    destination.append(reinterpret_cast<const std::byte*>(&size), sizeof size);
    return sizeof size;
  }
  std::size_t decompress(std::span<const std::byte> source, pmrkit::byte_buffer& destination,
                         std::size_t max_output) {
    std::uint64_t size = 0;
    REQUIRE(source.size() == sizeof size);
    std::memcpy(&size, source.data(), sizeof size);
    if (size > max_output) throw codec_limit_error("zeros_codec: over the limit");
    const bytes zeros(size);
    destination.append(zeros.data(), zeros.size());
    return size;
  }
};

std::int32_t i32_at(const std::byte* p) {
  std::int32_t v;
  std::memcpy(&v, p, 4);  // little-endian host (x86-64, as the project targets)
  return v;
}

void put_i32(std::byte* p, std::int32_t v) { std::memcpy(p, &v, 4); }

// A wire message: header (opCode 2013) and a body of repetitive text with some noise.
bytes sample_message(std::size_t body = 20'000) {
  bytes m(16);
  std::mt19937 rng(1);
  while (m.size() < 16 + body) {
    const std::string record = "{\"_id\":" + std::to_string(rng() % 100000) + ",\"ok\":true}";
    for (char c : record) {
      if (m.size() == 16 + body) break;
      m.push_back(static_cast<std::byte>(c));
    }
  }
  put_i32(m.data(), static_cast<std::int32_t>(m.size()));
  put_i32(m.data() + 4, 77);
  put_i32(m.data() + 8, 5);
  put_i32(m.data() + 12, 2013);
  return m;
}

// A wire message whose body is all zeros.
bytes zero_message(std::size_t body) {
  bytes m(16 + body);
  put_i32(m.data(), static_cast<std::int32_t>(m.size()));
  put_i32(m.data() + 12, 2013);
  return m;
}

bytes to_bytes(const pmrkit::byte_buffer& b) { return {b.data(), b.data() + b.size()}; }

bytes wrap(const bytes& message) {
  xor_codec codec;
  pmrkit::byte_buffer out(std::pmr::new_delete_resource());
  pmrkit::bson::wrap_op_compressed(message, test_codec_id, codec, out);
  return to_bytes(out);
}

bytes unwrap(const bytes& wrapped,
             std::size_t max = pmrkit::bson::default_max_message_bytes) {
  xor_codec codec;
  pmrkit::byte_buffer out(std::pmr::new_delete_resource());
  pmrkit::bson::unwrap_op_compressed(wrapped, test_codec_id, codec, out, max);
  return to_bytes(out);
}

}  // namespace

TEST_CASE("OP_COMPRESSED layout and round trip", "[bson][op_compressed]") {
  const bytes message = sample_message();
  const bytes wrapped = wrap(message);
  CHECK(wrapped.size() == 25 + message.size() - 16);
  CHECK(i32_at(wrapped.data()) == static_cast<std::int32_t>(wrapped.size()));
  CHECK(i32_at(wrapped.data() + 4) == 77);    // requestID kept
  CHECK(i32_at(wrapped.data() + 8) == 5);     // responseTo kept
  CHECK(i32_at(wrapped.data() + 12) == 2012);
  CHECK(i32_at(wrapped.data() + 16) == 2013);  // originalOpcode
  CHECK(i32_at(wrapped.data() + 20) == static_cast<std::int32_t>(message.size() - 16));
  CHECK(wrapped[24] == std::byte{test_codec_id});
  CHECK(wrapped[25] == (message[16] ^ std::byte{0x5A}));  // the body, through the codec
  CHECK(unwrap(wrapped) == message);

  const auto h = pmrkit::bson::read_op_compressed_header(wrapped);
  CHECK(h.original_opcode == 2013);
  CHECK(h.uncompressed_size == static_cast<std::int32_t>(message.size() - 16));
  CHECK(h.compressor_id == test_codec_id);
}

TEST_CASE("the compression is passed in as a function too", "[bson][op_compressed]") {
  const bytes message = sample_message(300);
  std::size_t compressed_bytes = 0;
  auto compress = [&](std::span<const std::byte> body, pmrkit::byte_buffer& out) {
    compressed_bytes += body.size();
    out.append(body);
    return body.size();
  };
  pmrkit::byte_buffer out(std::pmr::new_delete_resource());
  pmrkit::bson::wrap_op_compressed(message, 42, compress, out);
  CHECK(compressed_bytes == 300);
  CHECK(out.data()[24] == std::byte{42});

  std::size_t limit_seen = 0;
  auto decompress = [&](std::span<const std::byte> payload, pmrkit::byte_buffer& into,
                        std::size_t max_output) {
    limit_seen = max_output;
    into.append(payload);
    return payload.size();
  };
  pmrkit::byte_buffer plain(std::pmr::new_delete_resource());
  CHECK(pmrkit::bson::unwrap_op_compressed(out.span(), 42, decompress, plain) == message.size());
  CHECK(limit_seen == 300);  // uncompressedSize is the decompressor's hard limit
  CHECK(to_bytes(plain) == message);
}

TEST_CASE("wrap and unwrap append, and leave the buffer unchanged when they fail",
          "[bson][op_compressed]") {
  const bytes message = sample_message(5000);
  xor_codec codec;
  pmrkit::byte_buffer out(std::pmr::new_delete_resource());
  out.append("xy", 2);
  const std::size_t n = pmrkit::bson::wrap_op_compressed(message, test_codec_id, codec, out);
  CHECK(out.size() == 2 + n);
  pmrkit::byte_buffer plain(std::pmr::new_delete_resource());
  plain.append("z", 1);
  CHECK(pmrkit::bson::unwrap_op_compressed(out.span().subspan(2), test_codec_id, codec, plain) ==
        message.size());
  CHECK(bytes(plain.data() + 1, plain.data() + plain.size()) == message);

  const std::size_t before = out.size();
  CHECK_THROWS_AS(pmrkit::bson::wrap_op_compressed(message, test_codec_id, codec, out, 100),
                  message_too_large);
  CHECK(out.size() == before);
  bytes damaged(out.data() + 2, out.data() + out.size());
  put_i32(damaged.data() + 20, 4000);  // declares less than the payload holds
  const std::size_t plain_before = plain.size();
  CHECK_THROWS_AS(pmrkit::bson::unwrap_op_compressed(damaged, test_codec_id, codec, plain),
                  codec_limit_error);  // the codec's own error, passed on as it is
  CHECK(plain.size() == plain_before);
}

TEST_CASE("a failed wrap or unwrap leaves the buffer's storage where it was",
          "[bson][op_compressed]") {
  // Full buffers, so that the result needs more room: a pointer into them stays good.
  const bytes message = sample_message(5000);
  xor_codec codec;
  const auto full = [](const char* text, std::size_t n) {
    auto b = pmrkit::byte_buffer::make_standalone(std::pmr::new_delete_resource(), n);
    b.append(text, n);
    return b;
  };
  const auto unchanged = [](const pmrkit::byte_buffer& b, const std::byte* data,
                            std::size_t capacity, std::string_view text) {
    CHECK(b.data() == data);
    CHECK(b.capacity() == capacity);
    CHECK(std::string_view(reinterpret_cast<const char*>(b.data()), b.size()) == text);
  };
  pmrkit::byte_buffer out = full("xy", 2);
  const std::byte* const out_data = out.data();
  CHECK_THROWS_AS(pmrkit::bson::wrap_op_compressed(message, test_codec_id, codec, out, 100),
                  message_too_large);
  unchanged(out, out_data, 2, "xy");

  pmrkit::byte_buffer wrapped(std::pmr::new_delete_resource());
  pmrkit::bson::wrap_op_compressed(message, test_codec_id, codec, wrapped);
  bytes damaged(wrapped.data(), wrapped.data() + wrapped.size());
  put_i32(damaged.data() + 20, 4000);  // declares less than the payload holds
  pmrkit::byte_buffer plain = full("abcdefgh", 8);
  const std::byte* const plain_data = plain.data();
  CHECK_THROWS_AS(pmrkit::bson::unwrap_op_compressed(damaged, test_codec_id, codec, plain),
                  codec_limit_error);
  unchanged(plain, plain_data, 8, "abcdefgh");

  // And a success moves the buffer to storage with room, its bytes kept.
  CHECK(pmrkit::bson::unwrap_op_compressed(wrapped.span(), test_codec_id, codec, plain) ==
        message.size());
  CHECK(bytes(plain.data(), plain.data() + 8) == to_bytes(full("abcdefgh", 8)));
  CHECK(bytes(plain.data() + 8, plain.data() + plain.size()) == message);
}

TEST_CASE("a compressor that writes its format's worst case never moves the buffer",
          "[bson][op_compressed]") {
  // Snappy's worst case, 32 + n + n/6, is more than zstd's: had wrap left zstd's room, the
  // compressor would grow the buffer in place, and message_too_large then left it moved.
  const bytes message = sample_message(4000);
  const auto snappy_worst = [](std::span<const std::byte> source, pmrkit::byte_buffer& out) {
    const std::size_t n = 32 + source.size() + source.size() / 6;
    const std::vector<std::byte> written(n, std::byte{0x42});
    out.append(written);
    return n;
  };
  auto out = pmrkit::byte_buffer::make_standalone(std::pmr::new_delete_resource(), 4104);
  out.append("xy", 2);
  const std::byte* const storage = out.data();
  CHECK_THROWS_AS(pmrkit::bson::wrap_op_compressed(message, pmrkit::bson::compressor_id_snappy,
                                                   snappy_worst, out, 4500),
                  message_too_large);
  CHECK(out.data() == storage);
  CHECK(out.capacity() == 4104);
  CHECK(out.size() == 2);
}

TEST_CASE("unwrap writes in place into a buffer with room for the whole message",
          "[bson][op_compressed]") {
  const bytes message = sample_message(50'000);
  xor_codec codec;
  pmrkit::byte_buffer wrapped(std::pmr::new_delete_resource());
  pmrkit::bson::wrap_op_compressed(message, test_codec_id, codec, wrapped);
  pmrkit::counting_resource counted;
  auto out = pmrkit::byte_buffer::make_standalone(&counted, 3 + message.size());
  out.append("abc", 3);
  const std::byte* const storage = out.data();
  const auto before = counted.stats().allocations;
  CHECK(pmrkit::bson::unwrap_op_compressed(wrapped.span(), test_codec_id, codec, out) ==
        message.size());
  CHECK(counted.stats().allocations == before);
  CHECK(out.data() == storage);
  CHECK(bytes(out.data() + 3, out.data() + out.size()) == message);
}

TEST_CASE("a frame that makes less than uncompressedSize leaves the buffer's storage alone",
          "[bson][op_compressed]") {
  // The decompressor grows its buffer for what the frame holds, within the declared size; the
  // shortfall is found after it. Had the caller's buffer been grown in place, its storage was
  // already freed then, and a pointer into it dangled.
  const bytes message = sample_message(1000);
  xor_codec codec;
  pmrkit::byte_buffer wrapped(std::pmr::new_delete_resource());
  pmrkit::bson::wrap_op_compressed(message, test_codec_id, codec, wrapped);
  bytes claims_more(wrapped.data(), wrapped.data() + wrapped.size());
  put_i32(claims_more.data() + 20, 1500);
  auto out = pmrkit::byte_buffer::make_standalone(std::pmr::new_delete_resource(), 32);
  out.append("previous", 8);  // room for the header, not for the message
  const std::byte* const storage = out.data();
  CHECK_THROWS_WITH(
      pmrkit::bson::unwrap_op_compressed(claims_more, test_codec_id, codec, out),
      Catch::Matchers::Contains("uncompressedSize is 1500"));
  CHECK(out.data() == storage);
  CHECK(out.capacity() == 32);
  CHECK(std::string_view(reinterpret_cast<const char*>(out.data()), out.size()) == "previous");
}

TEST_CASE("a short message that declares a huge uncompressedSize takes no room for it",
          "[bson][op_compressed]") {
  // 30 bytes that claim 47 MB: the output buffer must not grow for the claim before the
  // decompressor has looked at the payload.
  bytes message(30);
  put_i32(message.data(), 30);
  put_i32(message.data() + 12, 2012);  // OP_COMPRESSED
  put_i32(message.data() + 16, 2013);  // OP_MSG inside
  put_i32(message.data() + 20, 47'000'000);
  message[24] = std::byte{test_codec_id};
  pmrkit::counting_resource counted;
  pmrkit::byte_buffer out(&counted);
  std::size_t in_use_when_called = 0;
  const auto refusing = [&](std::span<const std::byte>, pmrkit::byte_buffer&,
                            std::size_t) -> std::size_t {
    in_use_when_called = counted.stats().bytes_in_use;
    throw codec_limit_error("not a frame");
  };
  CHECK_THROWS_AS(pmrkit::bson::unwrap_op_compressed(message, test_codec_id, refusing, out),
                  codec_limit_error);
  CHECK(in_use_when_called < 4096);
  CHECK(counted.stats().peak_bytes_in_use < 4096);
  CHECK(out.capacity() == 0);
}

TEST_CASE("messages that cannot be wrapped are refused", "[bson][op_compressed]") {
  xor_codec codec;
  pmrkit::byte_buffer out(std::pmr::new_delete_resource());
  bytes m = sample_message(100);
  CHECK_THROWS_AS(pmrkit::bson::wrap_op_compressed({m.data(), 10}, test_codec_id, codec, out),
                  wire_format_error);
  bytes wrong_length = m;
  put_i32(wrong_length.data(), 50);
  CHECK_THROWS_AS(pmrkit::bson::wrap_op_compressed(wrong_length, test_codec_id, codec, out),
                  wire_format_error);
  const bytes wrapped = wrap(m);
  CHECK_THROWS_AS(pmrkit::bson::wrap_op_compressed(wrapped, test_codec_id, codec, out),
                  wire_format_error);
  CHECK(out.empty());
  CHECK(codec.compress_calls == 0);
  // A message larger than the limit, though it compresses far below it: a receiver with the
  // same limit refuses its uncompressedSize.
  zeros_codec zeros;
  const bytes large = zero_message(2000);
  CHECK_THROWS_WITH(pmrkit::bson::wrap_op_compressed(large, test_codec_id, zeros, out,
                                                     large.size() - 1),
                    Catch::Matchers::Contains("the message to wrap is 2016 bytes"));
  CHECK(out.empty());
}

template <class Codec>
void wrap_and_unwrap_agree(const bytes& m) {
  Codec codec;
  {
    // The tightest limit wrap accepts: the message itself, or the wrapped result if larger.
    pmrkit::byte_buffer wrapped(std::pmr::new_delete_resource());
    pmrkit::bson::wrap_op_compressed(m, test_codec_id, codec, wrapped, SIZE_MAX);
    const std::size_t limit = std::max(m.size(), wrapped.size());
    wrapped.clear();
    REQUIRE(pmrkit::bson::wrap_op_compressed(m, test_codec_id, codec, wrapped, limit) > 0);
    pmrkit::byte_buffer unwrapped(std::pmr::new_delete_resource());
    CHECK(pmrkit::bson::unwrap_op_compressed(wrapped.span(), test_codec_id, codec, unwrapped,
                                             limit) == m.size());
    wrapped.clear();
    CHECK_THROWS_AS(pmrkit::bson::wrap_op_compressed(m, test_codec_id, codec, wrapped, limit - 1),
                    message_too_large);
  }
}

TEST_CASE("what wrap accepts at a limit, unwrap accepts at the same limit",
          "[bson][op_compressed]") {
  wrap_and_unwrap_agree<xor_codec>(sample_message(4000));  // the wrapped message is the larger
  wrap_and_unwrap_agree<zeros_codec>(zero_message(4000));  // the message itself is the larger
}

TEST_CASE("every inconsistent OP_COMPRESSED field is rejected", "[bson][op_compressed]") {
  const bytes message = sample_message(3000);
  const bytes good = wrap(message);
  auto expect = [](const bytes& m, const char* fragment) {
    try {
      unwrap(m);
      FAIL("accepted: " << fragment);
    } catch (const std::exception& e) {
      INFO(e.what());
      CHECK(std::string(e.what()).find(fragment) != std::string::npos);
    }
  };
  for (std::size_t n = 0; n < good.size(); n += (n < 40 ? 1 : 53)) {
    CHECK_THROWS_AS(unwrap(bytes(good.begin(), good.begin() + static_cast<std::ptrdiff_t>(n))),
                    wire_format_error);
  }
  bytes m = good;
  put_i32(m.data(), static_cast<std::int32_t>(m.size() + 1));
  expect(m, "disagrees");
  m = good;
  put_i32(m.data() + 12, 2013);
  expect(m, "opCode 2013");
  m = good;
  put_i32(m.data() + 16, 2012);
  expect(m, "nested");
  m = good;
  put_i32(m.data() + 20, -1);
  expect(m, "uncompressedSize -1");
  m = good;
  put_i32(m.data() + 20, 48'000'000);
  expect(m, "out of range");
  m = good;
  m[24] = std::byte{1};
  expect(m, "1 (snappy)");
  m = good;
  m[24] = std::byte{3};  // zstd, which this caller did not pass in
  expect(m, "3 (zstd) is not supported: allowed 0 (noop) and 200");
  m = good;
  put_i32(m.data() + 20, i32_at(good.data() + 20) + 10);  // claims more than the payload holds
  expect(m, "holds");
  CHECK_THROWS_AS(unwrap(good, good.size() - 1), message_too_large);
  // With no limit of the caller's, the unwrapped messageLength (16 + uncompressedSize) must
  // still fit its int32: INT32_MAX - 10 would have wrapped it negative.
  m = good;
  put_i32(m.data() + 20, INT32_MAX - 10);
  CHECK_THROWS_AS(pmrkit::bson::read_op_compressed_header(m, SIZE_MAX), message_too_large);
  put_i32(m.data() + 20, INT32_MAX - 16);
  CHECK(pmrkit::bson::read_op_compressed_header(m, SIZE_MAX).uncompressed_size == INT32_MAX - 16);
}

TEST_CASE("compressorId 0 (noop) carries the body as it is, with no compressor called",
          "[bson][op_compressed]") {
  const bytes message = sample_message(500);
  bytes noop(25 + message.size() - 16);
  put_i32(noop.data(), static_cast<std::int32_t>(25 + message.size() - 16));
  put_i32(noop.data() + 4, 77);
  put_i32(noop.data() + 8, 5);
  put_i32(noop.data() + 12, 2012);
  put_i32(noop.data() + 16, 2013);
  put_i32(noop.data() + 20, static_cast<std::int32_t>(message.size() - 16));
  noop[24] = std::byte{0};
  std::memcpy(noop.data() + 25, message.data() + 16, message.size() - 16);
  CHECK(unwrap(noop) == message);

  xor_codec codec;
  pmrkit::byte_buffer out(std::pmr::new_delete_resource());
  pmrkit::bson::wrap_op_compressed(message, pmrkit::bson::compressor_id_noop, codec, out);
  CHECK(codec.compress_calls == 0);
  CHECK(to_bytes(out) == noop);
}

TEST_CASE("an OP_MSG insert survives OP_COMPRESSED and parses again", "[bson][op_compressed]") {
  pmrkit::buffer_pool pool;
  pmrkit::bson::insert_builder builder(pool);
  auto insert = builder.begin("db", "events");
  pmrkit::bson::document d;
  for (int i = 0; i < 300; ++i) {
    d.clear();
    d.append_int32("i", i).append_utf8("kind", "click").append_bool("ok", true);
    insert.add(d);
  }
  const pmrkit::byte_buffer message = insert.finish();
  xor_codec codec;
  pmrkit::byte_buffer wrapped = pool.acquire();
  pmrkit::bson::wrap_op_compressed(message.span(), test_codec_id, codec, wrapped);
  pmrkit::byte_buffer unwrapped = pool.acquire();
  pmrkit::bson::unwrap_op_compressed(wrapped.span(), test_codec_id, codec, unwrapped);
  CHECK(to_bytes(unwrapped) == to_bytes(message));
  const auto view = pmrkit::bson::parse_op_msg(unwrapped.span());
  CHECK(view.find_sequence("documents").documents.count() == 300);
}

#ifdef PMRKIT_TEST_HAVE_ZSTD
TEST_CASE("pmrkit::zstd's compressor and decompressor fit as they are", "[bson][op_compressed]") {
  const bytes message = sample_message(20'000);
  pmrkit::zstd::compressor c;
  pmrkit::zstd::decompressor d;
  pmrkit::byte_buffer wrapped(std::pmr::new_delete_resource());
  pmrkit::bson::wrap_op_compressed(message, pmrkit::bson::compressor_id_zstd, c, wrapped);
  CHECK(wrapped.data()[24] == std::byte{3});
  CHECK(wrapped.size() < message.size() / 2);
  pmrkit::byte_buffer plain(std::pmr::new_delete_resource());
  pmrkit::bson::unwrap_op_compressed(wrapped.span(), pmrkit::bson::compressor_id_zstd, d, plain);
  CHECK(to_bytes(plain) == message);

  // A frame that declares more than uncompressedSize: zstd's own refusal comes through.
  bytes m = to_bytes(wrapped);
  put_i32(m.data() + 20, i32_at(m.data() + 20) - 10);
  pmrkit::byte_buffer refused(std::pmr::new_delete_resource());
  CHECK_THROWS_AS(
      pmrkit::bson::unwrap_op_compressed(m, pmrkit::bson::compressor_id_zstd, d, refused),
      pmrkit::zstd::output_limit_exceeded);
  CHECK(refused.empty());

  pmrkit::zstd::compressor_pool pool;
  pmrkit::byte_buffer pooled(std::pmr::new_delete_resource());
  pmrkit::bson::wrap_op_compressed(message, pmrkit::bson::compressor_id_zstd, pool, pooled);
  CHECK(pooled.data()[24] == std::byte{3});
}

#ifdef PMRKIT_TEST_ZSTD_CLI
TEST_CASE("the zstd tool decompresses the OP_COMPRESSED payload to the original body",
          "[bson][op_compressed][cli]") {
  const bytes message = sample_message(50'000);
  pmrkit::zstd::compressor c;
  pmrkit::byte_buffer wrapped(std::pmr::new_delete_resource());
  pmrkit::bson::wrap_op_compressed(message, pmrkit::bson::compressor_id_zstd, c, wrapped);
  bool ok = false;
  const bytes body = pmrkit::zstd::test::zstd_cli_decompress(
      PMRKIT_TEST_ZSTD_CLI, wrapped.span().subspan(25), ok);
  CHECK(ok);
  CHECK(body == bytes(message.begin() + 16, message.end()));
}
#endif
#endif
