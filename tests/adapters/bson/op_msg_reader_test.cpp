// The OP_MSG reader: it accepts what insert_message writes, and rejects every truncated or
// inconsistent message with wire_format_error — never reading out of bounds (every input here
// sits in a buffer of exactly its size, so the AddressSanitizer pass catches any overrun).
#include <catch2/catch.hpp>

#include <cstdint>
#include <cstring>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include "pmrkit/bson/document.hpp"
#include "pmrkit/bson/insert_message.hpp"
#include "pmrkit/bson/op_msg_reader.hpp"

namespace {

using bytes = std::vector<std::byte>;
using pmrkit::bson::parse_op_msg;
using pmrkit::bson::reader_limits;
using pmrkit::bson::wire_format_error;

// Writes messages by hand, so that tests can make every field wrong on purpose.
struct writer {
  bytes out;
  writer& u8(std::uint8_t v) {
    out.push_back(std::byte{v});
    return *this;
  }
  writer& i32(std::int32_t v) {
    const auto u = static_cast<std::uint32_t>(v);
    for (int s = 0; s < 32; s += 8) out.push_back(static_cast<std::byte>((u >> s) & 0xFF));
    return *this;
  }
  writer& raw(std::span<const std::byte> b) {
    out.insert(out.end(), b.begin(), b.end());
    return *this;
  }
  writer& cstring(std::string_view s) {
    for (char c : s) out.push_back(static_cast<std::byte>(c));
    return u8(0);
  }
  writer& header(std::int32_t op_code = 2013) { return i32(0).i32(7).i32(0).i32(op_code); }
  // Patches messageLength to the size written.
  bytes done() {
    bytes b = out;
    const auto n = static_cast<std::uint32_t>(b.size());
    for (int i = 0; i < 4; ++i) b[i] = static_cast<std::byte>((n >> (8 * i)) & 0xFF);
    return b;
  }
};

bytes doc_bytes(int value, const char* key = "x") {
  pmrkit::bson::document d;
  d.append_int32(key, value);
  return {d.bytes().begin(), d.bytes().end()};
}

// A sequence section: kind, size (its own 4 bytes + identifier + docs), identifier, docs.
writer& sequence(writer& w, std::string_view identifier, const std::vector<bytes>& docs,
                 std::int32_t size_adjust = 0) {
  std::size_t size = 4 + identifier.size() + 1;
  for (const auto& d : docs) size += d.size();
  w.u8(1).i32(static_cast<std::int32_t>(size) + size_adjust).cstring(identifier);
  for (const auto& d : docs) w.raw(d);
  return w;
}

bytes valid_message() {
  writer w;
  w.header().i32(0);
  w.u8(0).raw(doc_bytes(1, "insert"));
  sequence(w, "documents", {doc_bytes(1), doc_bytes(2), doc_bytes(3)});
  return w.done();
}

// Parses from a heap block of exactly the message's size, so an overrun is an ASan error.
pmrkit::bson::op_msg_view parse_exact(const bytes& message, const reader_limits& limits = {}) {
  static std::unique_ptr<std::byte[]> block;  // kept alive for the returned view
  block = std::make_unique<std::byte[]>(message.size());
  if (!message.empty()) std::memcpy(block.get(), message.data(), message.size());
  return parse_op_msg({block.get(), message.size()}, limits);
}

void check_rejected(const bytes& message, const std::string& fragment,
                    const reader_limits& limits = {}) {
  try {
    parse_exact(message, limits);
    FAIL("accepted a message that should be rejected for: " << fragment);
  } catch (const wire_format_error& e) {
    INFO(e.what());
    CHECK(std::string(e.what()).find(fragment) != std::string::npos);
  }
}

}  // namespace

TEST_CASE("reader walks a hand-written OP_MSG", "[bson][reader]") {
  const bytes message = valid_message();
  const auto view = parse_exact(message);
  CHECK(view.header().message_length == static_cast<std::int32_t>(message.size()));
  CHECK(view.header().request_id == 7);
  CHECK(view.header().op_code == 2013);
  CHECK(view.flag_bits() == 0);
  CHECK(view.body().size() == doc_bytes(1, "insert").size());
  REQUIRE(view.sequence_count() == 1);
  const auto seq = view.sequence(0);
  CHECK(seq.identifier == "documents");
  CHECK(seq.documents.count() == 3);
  int expected = 1;
  for (auto d : seq.documents) {
    const bytes want = doc_bytes(expected++);
    CHECK(bytes(d.begin(), d.end()) == want);
  }
  CHECK(expected == 4);
  bool found = false;
  view.find_sequence("documents", &found);
  CHECK(found);
  view.find_sequence("updates", &found);
  CHECK_FALSE(found);
  CHECK_THROWS_AS(view.sequence(1), std::out_of_range);
}

TEST_CASE("reader accepts what insert_message writes", "[bson][reader]") {
  pmrkit::buffer_pool pool;
  pmrkit::bson::insert_builder builder(pool);
  auto message = builder.begin("shop", "orders");
  for (int i = 0; i < 50; ++i) message.add(doc_bytes(i));
  const pmrkit::byte_buffer out = message.finish();
  const auto view = parse_op_msg(out.span());
  CHECK(view.sequence(0).documents.count() == 50);
  CHECK(view.sequence(0).size ==
        static_cast<std::int32_t>(out.size() - view.body().size() - 20 - 2));
}

TEST_CASE("every truncation of a valid message is rejected", "[bson][reader]") {
  const bytes message = valid_message();
  for (std::size_t n = 0; n < message.size(); ++n) {
    bytes cut(message.begin(), message.begin() + static_cast<std::ptrdiff_t>(n));
    INFO("length " << n);
    CHECK_THROWS_AS(parse_exact(cut), wire_format_error);
    // Also with messageLength patched to agree, so the sections themselves are what is short
    // (cutting right after the body leaves a complete message with no sequence: valid).
    const std::size_t after_body = 20 + 1 + doc_bytes(1, "insert").size();
    if (n >= 4 && n != after_body) {
      writer w;
      w.out = cut;
      CHECK_THROWS_AS(parse_exact(w.done()), wire_format_error);
    }
  }
}

TEST_CASE("header fields that disagree are rejected", "[bson][reader]") {
  bytes m = valid_message();
  bytes longer = m;
  longer.push_back(std::byte{0});
  check_rejected(longer, "disagrees");
  m[0] = static_cast<std::byte>(static_cast<std::uint8_t>(m[0]) + 1);
  check_rejected(m, "disagrees");

  writer w;
  w.header(2004).i32(0).u8(0).raw(doc_bytes(1));
  check_rejected(w.done(), "opCode 2004");
  bytes negative = valid_message();
  negative[3] = std::byte{0x80};
  check_rejected(negative, "out of range");
}

TEST_CASE("flagBits: unknown required bits are rejected, optional ones allowed",
          "[bson][reader]") {
  for (std::uint32_t bit = 2; bit < 16; ++bit) {
    writer w;
    w.header().i32(static_cast<std::int32_t>(1u << bit)).u8(0).raw(doc_bytes(1));
    check_rejected(w.done(), "unknown required bit");
  }
  writer ok;
  ok.header().i32(static_cast<std::int32_t>(pmrkit::bson::flag_more_to_come |
                                            pmrkit::bson::flag_exhaust_allowed))
      .u8(0)
      .raw(doc_bytes(1));
  const auto view = parse_exact(ok.done());
  CHECK(view.more_to_come());
}

TEST_CASE("checksum: a correct CRC-32C is accepted, a wrong one rejected", "[bson][reader]") {
  const char* check = "123456789";
  CHECK(pmrkit::bson::crc32c({reinterpret_cast<const std::byte*>(check), 9}) == 0xE3069283u);

  writer w;
  w.header().i32(1).u8(0).raw(doc_bytes(1));
  bytes m = w.out;
  m.resize(m.size() + 4);  // room for the checksum, counted in messageLength
  writer sized;
  sized.out = m;
  m = sized.done();
  const std::uint32_t crc = pmrkit::bson::crc32c({m.data(), m.size() - 4});
  for (int i = 0; i < 4; ++i) m[m.size() - 4 + i] = static_cast<std::byte>((crc >> (8 * i)) & 0xFF);
  const auto view = parse_exact(m);
  CHECK(view.checksum_present());
  CHECK(view.body().size() == doc_bytes(1).size());
  m.back() ^= std::byte{1};
  check_rejected(m, "checksum");
}

TEST_CASE("section structure errors are rejected", "[bson][reader]") {
  {
    writer w;
    w.header().i32(0).u8(2).raw(doc_bytes(1));
    check_rejected(w.done(), "section kind 2");
  }
  {
    writer w;
    w.header().i32(0).u8(0).raw(doc_bytes(1)).u8(0).raw(doc_bytes(2));
    check_rejected(w.done(), "second kind-0");
  }
  {
    writer w;
    w.header().i32(0);
    sequence(w, "documents", {doc_bytes(1)});
    check_rejected(w.done(), "no kind-0");
  }
  {
    writer w;
    w.header().i32(0).u8(0).raw(doc_bytes(1));
    sequence(w, "documents", {doc_bytes(1)}, +1);  // size one past the end
    check_rejected(w.done(), "out of range");
  }
  {
    writer w;
    w.header().i32(0).u8(0).raw(doc_bytes(1));
    sequence(w, "documents", {doc_bytes(1)}, -1);  // document overruns the sequence
    w.u8(0);  // keep the message length consistent with something after it
    check_rejected(w.done(), "document in a document sequence");
  }
  {
    writer w;
    w.header().i32(0).u8(0).raw(doc_bytes(1));
    w.u8(1).i32(4 + 3).raw(bytes{std::byte{'a'}, std::byte{'b'}, std::byte{'c'}});
    check_rejected(w.done(), "not terminated");
  }
  {
    writer w;
    w.header().i32(0).u8(0).raw(doc_bytes(1));
    sequence(w, "", {doc_bytes(1)});
    check_rejected(w.done(), "empty");
  }
  {
    writer w;
    w.header().i32(0).u8(0).raw(doc_bytes(1));
    sequence(w, "documents", {doc_bytes(1)});
    sequence(w, "documents", {doc_bytes(2)});
    check_rejected(w.done(), "appears twice");
  }
  {
    writer w;
    w.header().i32(0).u8(0).raw(doc_bytes(1));
    for (int i = 0; i < 3; ++i) {
      const std::string identifier(1, static_cast<char>('a' + i));  // distinct identifiers
      sequence(w, identifier, {doc_bytes(i)});
    }
    reader_limits limits;
    limits.max_document_sequences = 2;
    check_rejected(w.done(), "more than the allowed 2", limits);
  }
}

TEST_CASE("document framing errors are rejected", "[bson][reader]") {
  {
    bytes d = doc_bytes(1);
    d.back() = std::byte{1};
    writer w;
    w.header().i32(0).u8(0).raw(d);
    check_rejected(w.done(), "terminator");
  }
  {
    writer w;
    w.header().i32(0).u8(0).i32(4).u8(0);
    check_rejected(w.done(), "document length 4");
  }
  {
    // Leftover bytes in a sequence that are too few to be a document.
    writer w;
    w.header().i32(0).u8(0).raw(doc_bytes(1));
    bytes junk = doc_bytes(2);
    junk.push_back(std::byte{0});
    junk.push_back(std::byte{0});
    sequence(w, "documents", {junk});
    check_rejected(w.done(), "at least 5 bytes");
  }
}

TEST_CASE("limits on message and document size are enforced", "[bson][reader]") {
  const bytes m = valid_message();
  reader_limits small;
  small.max_message_bytes = m.size() - 1;
  check_rejected(m, "more than the allowed", small);
  reader_limits tiny_docs;
  tiny_docs.max_document_bytes = 11;
  check_rejected(m, "more than the allowed 11", tiny_docs);
  reader_limits bad;
  bad.max_nesting = 5000;
  CHECK_THROWS_AS(parse_exact(m, bad), std::invalid_argument);
}

TEST_CASE("element structure errors are rejected, and can be left to the caller",
          "[bson][reader]") {
  auto with_body = [](const bytes& body) {
    writer w;
    w.header().i32(0).u8(0).raw(body);
    return w.done();
  };
  // {x: <type 0x42>} — an unknown element type.
  bytes unknown = doc_bytes(1);
  unknown[4] = std::byte{0x42};
  check_rejected(with_body(unknown), "unknown element type 0x42");
  reader_limits framing_only;
  framing_only.validate_documents = false;
  CHECK_NOTHROW(parse_exact(with_body(unknown), framing_only));

  pmrkit::bson::document s;
  s.append_utf8("s", "hello");
  bytes str(s.bytes().begin(), s.bytes().end());
  str[7] = std::byte{100};  // string length runs past the document
  check_rejected(with_body(str), "string length 100");

  pmrkit::bson::document b;
  b.append_bool("b", true);
  bytes boolean(b.bytes().begin(), b.bytes().end());
  boolean[7] = std::byte{2};
  check_rejected(with_body(boolean), "boolean value 2");

  pmrkit::bson::document deep;
  for (int i = 0; i < 5; ++i) deep.begin_document("d");
  for (int i = 0; i < 5; ++i) deep.end();
  const bytes nested(deep.bytes().begin(), deep.bytes().end());
  reader_limits shallow;
  shallow.max_nesting = 4;
  check_rejected(with_body(nested), "nesting", shallow);
  shallow.max_nesting = 5;
  CHECK_NOTHROW(parse_exact(with_body(nested), shallow));
}

TEST_CASE("read_message_header checks what a stream reader needs", "[bson][reader]") {
  const bytes m = valid_message();
  CHECK(pmrkit::bson::read_message_header(m).message_length ==
        static_cast<std::int32_t>(m.size()));
  CHECK_THROWS_AS(pmrkit::bson::read_message_header({m.data(), 15}), wire_format_error);
  CHECK_THROWS_AS(pmrkit::bson::read_message_header(m, 20), wire_format_error);
}

TEST_CASE("random corruption is either accepted or rejected with wire_format_error",
          "[bson][reader]") {
  pmrkit::bson::document d;
  d.append_utf8("name", "x").append_int64("n", 5).begin_array("a").append_double("", 1.5).end();
  writer w;
  w.header().i32(0).u8(0).raw(doc_bytes(1, "insert"));
  const bytes doc(d.bytes().begin(), d.bytes().end());
  sequence(w, "documents", {doc, doc});
  const bytes base = w.done();
  std::mt19937 rng(2024);
  int accepted = 0;
  int rejected = 0;
  for (int round = 0; round < 3000; ++round) {
    bytes m = base;
    const int flips = 1 + static_cast<int>(rng() % 4);
    for (int f = 0; f < flips; ++f) m[rng() % m.size()] = static_cast<std::byte>(rng() & 0xFF);
    if (rng() % 4 == 0) m.resize(rng() % m.size());
    try {
      const auto view = parse_exact(m);
      for (std::size_t i = 0; i < view.sequence_count(); ++i)
        for (auto doc_span : view.sequence(i).documents) CHECK(doc_span.size() >= 5);
      ++accepted;
    } catch (const wire_format_error&) {
      ++rejected;
    }
  }
  CHECK(rejected > 0);
  CHECK(accepted + rejected == 3000);
}
