// OP_COMPRESSED: the layout matches the wire protocol, wrapping and unwrapping give back the
// original message byte for byte (and, with the bson adapter, an OP_MSG its reader accepts),
// the zstd tool reads the payload, and every inconsistent field is rejected without touching
// the output buffer.
#include <catch2/catch.hpp>

#include <cstring>
#include <string>
#include <vector>

#include "pmrkit/zstd/op_compressed.hpp"
#include "pmrkit/zstd/errors.hpp"
#include "zstd_test_support.hpp"

#ifdef PMRKIT_TEST_HAVE_BSON
#include "pmrkit/bson/document.hpp"
#include "pmrkit/bson/insert_message.hpp"
#include "pmrkit/bson/op_msg_reader.hpp"
#endif

namespace {

using bytes = std::vector<std::byte>;
using pmrkit::zstd::compressor;
using pmrkit::zstd::decompressor;
using pmrkit::zstd::malformed_message;
using pmrkit::zstd::message_too_large;

std::int32_t i32_at(const std::byte* p) {
  std::int32_t v;
  std::memcpy(&v, p, 4);  // little-endian host (x86-64, as the project targets)
  return v;
}

void put_i32(std::byte* p, std::int32_t v) { std::memcpy(p, &v, 4); }

// A wire message: header (opCode 2013) and a compressible body.
bytes sample_message(std::size_t body = 20'000) {
  bytes m(16);
  const bytes payload = pmrkit::zstd::test::payload(body);
  m.insert(m.end(), payload.begin(), payload.end());
  put_i32(m.data(), static_cast<std::int32_t>(m.size()));
  put_i32(m.data() + 4, 77);
  put_i32(m.data() + 8, 5);
  put_i32(m.data() + 12, 2013);
  return m;
}

bytes wrap(const bytes& message) {
  compressor c;
  pmrkit::byte_buffer out(std::pmr::new_delete_resource());
  pmrkit::zstd::wrap_op_compressed(message, c, out);
  return {out.data(), out.data() + out.size()};
}

bytes unwrap(const bytes& wrapped, std::size_t max = pmrkit::zstd::default_max_message_bytes) {
  decompressor d;
  pmrkit::byte_buffer out(std::pmr::new_delete_resource());
  pmrkit::zstd::unwrap_op_compressed(wrapped, d, out, max);
  return {out.data(), out.data() + out.size()};
}

}  // namespace

TEST_CASE("OP_COMPRESSED layout and round trip", "[zstd][op_compressed]") {
  const bytes message = sample_message();
  const bytes wrapped = wrap(message);
  CHECK(i32_at(wrapped.data()) == static_cast<std::int32_t>(wrapped.size()));
  CHECK(i32_at(wrapped.data() + 4) == 77);    // requestID kept
  CHECK(i32_at(wrapped.data() + 8) == 5);     // responseTo kept
  CHECK(i32_at(wrapped.data() + 12) == 2012);
  CHECK(i32_at(wrapped.data() + 16) == 2013);  // originalOpcode
  CHECK(i32_at(wrapped.data() + 20) == static_cast<std::int32_t>(message.size() - 16));
  CHECK(wrapped[24] == std::byte{3});  // zstd
  CHECK(wrapped.size() < message.size() / 2);
  CHECK(unwrap(wrapped) == message);

  const auto h = pmrkit::zstd::read_op_compressed_header(wrapped);
  CHECK(h.original_opcode == 2013);
  CHECK(h.uncompressed_size == static_cast<std::int32_t>(message.size() - 16));
  CHECK(h.compressor_id == 3);
}

TEST_CASE("wrap and unwrap append, and leave the buffer unchanged when they fail",
          "[zstd][op_compressed]") {
  const bytes message = sample_message(5000);
  compressor c;
  decompressor d;
  pmrkit::byte_buffer out(std::pmr::new_delete_resource());
  out.append("xy", 2);
  const std::size_t n = pmrkit::zstd::wrap_op_compressed(message, c, out);
  CHECK(out.size() == 2 + n);
  pmrkit::byte_buffer plain(std::pmr::new_delete_resource());
  plain.append("z", 1);
  CHECK(pmrkit::zstd::unwrap_op_compressed(out.span().subspan(2), d, plain) == message.size());
  CHECK(bytes(plain.data() + 1, plain.data() + plain.size()) == message);

  const std::size_t before = out.size();
  CHECK_THROWS_AS(pmrkit::zstd::wrap_op_compressed(message, c, out, 100), message_too_large);
  CHECK(out.size() == before);
  bytes damaged(out.data() + 2, out.data() + out.size());
  damaged[30] ^= std::byte{0x77};
  const std::size_t plain_before = plain.size();
  CHECK_THROWS(pmrkit::zstd::unwrap_op_compressed(damaged, d, plain));
  CHECK(plain.size() == plain_before);
}

TEST_CASE("messages that cannot be wrapped are refused", "[zstd][op_compressed]") {
  compressor c;
  pmrkit::byte_buffer out(std::pmr::new_delete_resource());
  bytes m = sample_message(100);
  CHECK_THROWS_AS(pmrkit::zstd::wrap_op_compressed({m.data(), 10}, c, out), malformed_message);
  bytes wrong_length = m;
  put_i32(wrong_length.data(), 5);
  CHECK_THROWS_AS(pmrkit::zstd::wrap_op_compressed(wrong_length, c, out), malformed_message);
  const bytes wrapped = wrap(m);
  CHECK_THROWS_AS(pmrkit::zstd::wrap_op_compressed(wrapped, c, out), malformed_message);
  CHECK(out.empty());
}

TEST_CASE("every inconsistent OP_COMPRESSED field is rejected", "[zstd][op_compressed]") {
  const bytes message = sample_message(3000);
  const bytes good = wrap(message);
  auto expect = [](const bytes& m, const char* fragment) {
    try {
      unwrap(m);
      FAIL("accepted: " << fragment);
    } catch (const pmrkit::zstd::error& e) {
      INFO(e.what());
      CHECK(std::string(e.what()).find(fragment) != std::string::npos);
    }
  };
  for (std::size_t n = 0; n < good.size(); n += (n < 40 ? 1 : 53)) {
    CHECK_THROWS_AS(unwrap(bytes(good.begin(), good.begin() + static_cast<std::ptrdiff_t>(n))),
                    pmrkit::zstd::error);
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
  put_i32(m.data() + 20, i32_at(good.data() + 20) + 10);  // claims more than the frame holds
  expect(m, "holds");
  m = good;
  put_i32(m.data() + 20, i32_at(good.data() + 20) - 10);  // the frame declares more than this
  CHECK_THROWS_AS(unwrap(m), pmrkit::zstd::output_limit_exceeded);
  CHECK_THROWS_AS(unwrap(good, good.size() - 1), message_too_large);
}

TEST_CASE("compressorId 0 (noop) carries the body as it is", "[zstd][op_compressed]") {
  const bytes message = sample_message(500);
  bytes noop(25);
  put_i32(noop.data(), static_cast<std::int32_t>(25 + message.size() - 16));
  put_i32(noop.data() + 4, 77);
  put_i32(noop.data() + 8, 5);
  put_i32(noop.data() + 12, 2012);
  put_i32(noop.data() + 16, 2013);
  put_i32(noop.data() + 20, static_cast<std::int32_t>(message.size() - 16));
  noop[24] = std::byte{0};
  noop.insert(noop.end(), message.begin() + 16, message.end());
  CHECK(unwrap(noop) == message);
}

#ifdef PMRKIT_TEST_ZSTD_CLI
TEST_CASE("the zstd tool decompresses the OP_COMPRESSED payload to the original body",
          "[zstd][op_compressed][cli]") {
  const bytes message = sample_message(50'000);
  const bytes wrapped = wrap(message);
  bool ok = false;
  const bytes body = pmrkit::zstd::test::zstd_cli_decompress(
      PMRKIT_TEST_ZSTD_CLI, std::span(wrapped).subspan(25), ok);
  CHECK(ok);
  CHECK(body == bytes(message.begin() + 16, message.end()));
}
#endif

#ifdef PMRKIT_TEST_HAVE_BSON
TEST_CASE("an OP_MSG insert survives OP_COMPRESSED and parses again", "[zstd][op_compressed]") {
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
  compressor c;
  decompressor z;
  pmrkit::byte_buffer wrapped = pool.acquire();
  pmrkit::zstd::wrap_op_compressed(message.span(), c, wrapped);
  pmrkit::byte_buffer unwrapped = pool.acquire();
  pmrkit::zstd::unwrap_op_compressed(wrapped.span(), z, unwrapped);
  CHECK(unwrapped.size() == message.size());
  CHECK(std::memcmp(unwrapped.data(), message.data(), message.size()) == 0);
  const auto view = pmrkit::bson::parse_op_msg(unwrapped.span());
  CHECK(view.find_sequence("documents").documents.count() == 300);
}
#endif
