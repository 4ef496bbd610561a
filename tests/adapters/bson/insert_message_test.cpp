// insert_message / insert_builder: the layout matches the OP_MSG specification field by field,
// libbson's own reader and bson_validate() accept every document, pymongo's independent
// decoder reads the same message back, and a warm pool makes a message cost no allocation.
#include <bson/bson.h>
#include <unistd.h>

#include <catch2/catch.hpp>

#include <cstdint>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include "pmrkit/bson/document.hpp"
#include "pmrkit/bson/insert_message.hpp"
#include "pmrkit/bson/op_msg_reader.hpp"
#include "pmrkit/buffer_pool.hpp"
#include "pmrkit/counting_resource.hpp"
#include "shell_quote.hpp"

namespace {

using pmrkit::bson::document;
using pmrkit::bson::insert_builder;
using pmrkit::bson::insert_message;

std::int32_t i32_at(const pmrkit::byte_buffer& b, std::size_t at) {
  std::uint8_t raw[4];
  std::memcpy(raw, b.data() + at, 4);
  return static_cast<std::int32_t>(raw[0] | raw[1] << 8 | raw[2] << 16 |
                                   static_cast<std::uint32_t>(raw[3]) << 24);
}

pmrkit::bson::object_id id_for(int i) {
  pmrkit::bson::object_id id;
  for (std::size_t k = 0; k < id.bytes.size(); ++k) id.bytes[k] = std::byte(i + k);
  return id;
}

void encode_person(document& d, int i) {
  d.clear();
  d.append_object_id("_id", id_for(i))
      .append_utf8("name", "user" + std::to_string(i))
      .append_int32("age", 20 + i)
      .append_double("balance", 10.25 * i)
      .append_bool("active", i % 2 == 0)
      .append_date_time("created", 1700000000000 + i)
      .begin_document("address")
      .append_utf8("city", "Oslo")
      .end()
      .begin_array("tags")
      .append_utf8("", "a")
      .append_int32("", i)
      .end();
}

std::vector<std::vector<std::byte>> people(int n) {
  std::vector<std::vector<std::byte>> out;
  document d;
  for (int i = 0; i < n; ++i) {
    encode_person(d, i);
    out.emplace_back(d.bytes().begin(), d.bytes().end());
  }
  return out;
}

std::vector<std::span<const std::byte>> spans(const std::vector<std::vector<std::byte>>& docs) {
  return {docs.begin(), docs.end()};
}

bool libbson_validates(const std::uint8_t* data, std::size_t size) {
  bson_t view;
  if (!bson_init_static(&view, data, size)) return false;
  size_t offset = 0;
  return bson_validate(&view, BSON_VALIDATE_UTF8, &offset);
}

}  // namespace

TEST_CASE("insert message layout follows the OP_MSG specification", "[bson][insert]") {
  pmrkit::buffer_pool pool;
  insert_builder builder(pool);
  const auto docs = people(3);
  const pmrkit::byte_buffer m = builder.build("shop", "orders", spans(docs));

  // Header: messageLength, requestID, responseTo, opCode.
  CHECK(i32_at(m, 0) == static_cast<std::int32_t>(m.size()));
  CHECK(i32_at(m, 4) == 1);
  CHECK(i32_at(m, 8) == 0);
  CHECK(i32_at(m, 12) == 2013);
  CHECK(i32_at(m, 16) == 0);  // flagBits
  // Section kind 0, then the body document.
  CHECK(m.data()[20] == std::byte{0});
  const std::int32_t body = i32_at(m, 21);
  REQUIRE(libbson_validates(reinterpret_cast<const std::uint8_t*>(m.data() + 21),
                            static_cast<std::size_t>(body)));
  // Section kind 1: size counts its own int32, the cstring identifier and the documents.
  const std::size_t seq = 21 + static_cast<std::size_t>(body);
  CHECK(m.data()[seq] == std::byte{1});
  std::size_t docs_bytes = 0;
  for (const auto& d : docs) docs_bytes += d.size();
  CHECK(i32_at(m, seq + 1) ==
        static_cast<std::int32_t>(4 + std::strlen("documents") + 1 + docs_bytes));
  CHECK(std::string(reinterpret_cast<const char*>(m.data() + seq + 5)) == "documents");
  CHECK(seq + 1 + static_cast<std::size_t>(i32_at(m, seq + 1)) == m.size());
}

TEST_CASE("libbson reads the body and every document back", "[bson][insert]") {
  pmrkit::buffer_pool pool;
  insert_builder builder(pool);
  const auto docs = people(25);
  const pmrkit::byte_buffer m = builder.build("shop", "orders", spans(docs));
  const auto view = pmrkit::bson::parse_op_msg(m.span());

  bson_t body;
  REQUIRE(bson_init_static(&body, reinterpret_cast<const std::uint8_t*>(view.body().data()),
                           view.body().size()));
  bson_iter_t it;
  REQUIRE(bson_iter_init(&it, &body));
  REQUIRE(bson_iter_next(&it));  // the command name is the first key
  CHECK(std::string(bson_iter_key(&it)) == "insert");
  CHECK(std::string(bson_iter_utf8(&it, nullptr)) == "orders");
  REQUIRE(bson_iter_init_find(&it, &body, "$db"));
  CHECK(std::string(bson_iter_utf8(&it, nullptr)) == "shop");
  REQUIRE(bson_iter_init_find(&it, &body, "ordered"));
  CHECK(bson_iter_bool(&it));

  // The documents sequence through libbson's own stream reader.
  const auto seq = view.find_sequence("documents");
  bson_reader_t* reader = bson_reader_new_from_data(
      reinterpret_cast<const std::uint8_t*>(seq.documents.bytes().data()),
      seq.documents.bytes().size());
  std::size_t n = 0;
  bool eof = false;
  while (const bson_t* doc = bson_reader_read(reader, &eof)) {
    REQUIRE(n < docs.size());
    size_t offset = 0;
    CHECK(bson_validate(doc, BSON_VALIDATE_UTF8, &offset));
    CHECK(doc->len == docs[n].size());
    CHECK(std::memcmp(bson_get_data(doc), docs[n].data(), doc->len) == 0);
    ++n;
  }
  CHECK(eof);
  CHECK(n == docs.size());
  bson_reader_destroy(reader);
}

#if PMRKIT_TEST_HAVE_PYMONGO
namespace {

std::string run_decoder(const pmrkit::byte_buffer& m) {
  static int counter = 0;
  const auto path = std::filesystem::temp_directory_path() /
                    ("pmrkit_bson_" + std::to_string(::getpid()) + "_" +
                     std::to_string(counter++) + ".bin");
  {
    std::ofstream f(path, std::ios::binary);
    f.write(reinterpret_cast<const char*>(m.data()), static_cast<std::streamsize>(m.size()));
  }
  const std::string command = pmrkit::test::shell_quoted(PMRKIT_TEST_PYTHON) + " " + pmrkit::test::shell_quoted(PMRKIT_TEST_DECODER) +
                              " " + pmrkit::test::shell_quoted(path.string()) + " 2>&1";
  std::string output;
  if (FILE* p = ::popen(command.c_str(), "r")) {
    char chunk[4096];
    std::size_t n;
    while ((n = std::fread(chunk, 1, sizeof chunk, p)) > 0) output.append(chunk, n);
    const int status = ::pclose(p);
    INFO(output);
    CHECK(status == 0);
  } else {
    FAIL("could not run " << command);
  }
  std::filesystem::remove(path);
  return output;
}

std::vector<std::string> lines(const std::string& text) {
  std::vector<std::string> out;
  std::istringstream in(text);
  for (std::string line; std::getline(in, line);) out.push_back(line);
  return out;
}

}  // namespace

TEST_CASE("pymongo's bson module decodes the message the same way", "[bson][insert][pymongo]") {
  pmrkit::buffer_pool pool;
  insert_builder builder(pool);
  document d;
  d.append_object_id("_id", id_for(1))
      .append_utf8("name", "Zoë")
      .append_int32("n", 7)
      .append_int64("big", 1LL << 40)
      .append_double("x", 2.5)
      .append_bool("ok", true)
      .append_date_time("at", 1700000000123)
      .append_null("none")
      .begin_document("sub")
      .append_utf8("k", "v")
      .end()
      .begin_array("list")
      .append_int32("", 1)
      .append_utf8("", "two")
      .end();
  document e;
  e.append_int32("only", -1);
  auto message = builder.begin("test-db", "people");
  message.add(d);
  message.add(e);
  const pmrkit::byte_buffer m = message.finish();

  const std::string decoded = run_decoder(m);
  INFO(decoded);
  const auto out = lines(decoded);
  REQUIRE(out.size() == 11);
  CHECK(out[0] == "messageLength " + std::to_string(m.size()));
  CHECK(out[1] == "bytes " + std::to_string(m.size()));
  CHECK(out[2] == "requestID 1");
  CHECK(out[3] == "responseTo 0");
  CHECK(out[4] == "opCode 2013");
  CHECK(out[5] == "flagBits 0");
  CHECK(out[6] == R"(body {"insert": "people", "$db": "test-db", "ordered": true})");
  const std::size_t docs = d.bytes().size() + e.bytes().size();
  CHECK(out[7] == "sequence documents size " + std::to_string(4 + 10 + docs) + " count 2");
  CHECK(out[8] ==
        "document {\"_id\": {\"$oid\": \"0102030405060708090a0b0c\"}, \"name\": \"Zo\\u00eb\", "
        "\"n\": {\"$numberInt\": \"7\"}, \"big\": {\"$numberLong\": \"1099511627776\"}, "
        "\"x\": {\"$numberDouble\": \"2.5\"}, \"ok\": true, "
        "\"at\": {\"$date\": {\"$numberLong\": \"1700000000123\"}}, \"none\": null, "
        "\"sub\": {\"k\": \"v\"}, \"list\": [{\"$numberInt\": \"1\"}, \"two\"]}");
  CHECK(out[9] == R"(document {"only": {"$numberInt": "-1"}})");
  CHECK(out[10] == "end");
}

TEST_CASE("pymongo decodes a 1000-document insert", "[bson][insert][pymongo]") {
  pmrkit::buffer_pool pool;
  insert_builder builder(pool, {.ordered = false});
  const auto docs = people(1000);
  const pmrkit::byte_buffer m = builder.build("db", "c", spans(docs));
  const auto out = lines(run_decoder(m));
  REQUIRE(out.size() == 6 + 1 + 1 + 1000 + 1);
  CHECK(out[6] == R"(body {"insert": "c", "$db": "db", "ordered": false})");
  CHECK(out[7].find(" count 1000") != std::string::npos);
  CHECK(out[8].find(R"("name": "user0")") != std::string::npos);
  CHECK(out[1007].find(R"("name": "user999")") != std::string::npos);
  CHECK(out.back() == "end");
}
#endif

TEST_CASE("a warm pool makes a message cost no allocation", "[bson][insert]") {
  pmrkit::counting_resource counted(std::pmr::new_delete_resource());
  {
    pmrkit::buffer_pool pool(&counted);
    insert_builder builder(pool);
    const auto docs = people(100);
    const void* first = nullptr;
    { first = builder.build("db", "c", spans(docs)).data(); }
    const auto warm = counted.stats().allocations;
    for (int i = 0; i < 10; ++i) {
      const pmrkit::byte_buffer m = builder.build("db", "c", spans(docs));
      CHECK(static_cast<const void*>(m.data()) == first);  // the same block, reused
    }
    CHECK(counted.stats().allocations == warm);
    CHECK(pool.stats().hits >= 10);
  }
  CHECK(counted.stats().bytes_in_use == 0);
}

TEST_CASE("a message grows through its buffer's pool when documents outgrow it",
          "[bson][insert]") {
  pmrkit::counting_resource counted(std::pmr::new_delete_resource());
  {
    pmrkit::buffer_pool pool(&counted);
    insert_builder builder(pool);
    auto message = builder.begin("db", "c");  // a small buffer to start with
    const auto docs = people(200);
    for (const auto& d : docs) message.add(d);
    const pmrkit::byte_buffer m = message.finish();
    CHECK(m.pool() == &pool);
    CHECK(pmrkit::bson::parse_op_msg(m.span()).sequence(0).documents.count() == 200);
  }
  CHECK(counted.stats().bytes_in_use == 0);
}

TEST_CASE("insert_message writes into a caller's buffer too", "[bson][insert]") {
  pmrkit::byte_buffer out =
      pmrkit::byte_buffer::make_standalone(std::pmr::new_delete_resource(), 4096);
  const void* storage = out.data();
  const auto docs = people(5);
  for (int round = 0; round < 3; ++round) {
    insert_message message(std::move(out), "db", "c", 42 + round);
    for (const auto& d : docs) message.add(d);
    out = message.finish();
    CHECK(static_cast<const void*>(out.data()) == storage);
    const auto view = pmrkit::bson::parse_op_msg(out.span());
    CHECK(view.header().request_id == 42 + round);
    CHECK(view.sequence(0).documents.count() == 5);
  }
}

TEST_CASE("insert_message rejects bad names and documents and keeps the message intact",
          "[bson][insert]") {
  pmrkit::buffer_pool pool;
  insert_builder builder(pool);
  CHECK_THROWS_AS(builder.begin("", "c"), std::invalid_argument);
  CHECK_THROWS_AS(builder.begin("db", std::string_view("a\0b", 3)), std::invalid_argument);

  auto message = builder.begin("db", "c");
  const auto docs = people(2);
  message.add(docs[0]);
  const std::size_t size = message.size();
  std::vector<std::byte> broken = docs[1];
  broken[0] = std::byte{3};
  CHECK_THROWS_AS(message.add(broken), std::invalid_argument);
  broken = docs[1];
  broken[4] = std::byte{0x55};  // unknown element type: only element validation sees it
  CHECK_THROWS_AS(message.add(broken), std::invalid_argument);
  CHECK(message.size() == size);
  CHECK(message.document_count() == 1);
  const pmrkit::byte_buffer m = message.finish();
  CHECK(pmrkit::bson::parse_op_msg(m.span()).sequence(0).documents.count() == 1);
  CHECK_THROWS_AS(message.add(docs[1]), std::logic_error);
  CHECK_THROWS_AS(message.finish(), std::logic_error);
}

TEST_CASE("insert_message refuses names that make a command no reader takes", "[bson][insert]") {
  // Names of up to 16 MiB each made a command document that parse_op_msg, like a server,
  // refuses past 16 MiB + 16 KiB.
  pmrkit::buffer_pool pool;
  insert_builder builder(pool);
  const std::string nine_mb(9'000'000, 'n');
  CHECK_THROWS_WITH(builder.begin(nine_mb, nine_mb),
                    Catch::Matchers::Contains("command document 18000038 bytes"));
  // At the bound exactly: written, and read back.
  constexpr std::size_t overhead = 38;  // the body's bytes besides the two names
  constexpr std::size_t names = pmrkit::bson::max_command_document_bytes - overhead;
  const std::string database(names / 2, 'd');
  const std::string collection(names - names / 2, 'c');
  auto message = builder.begin(database, collection);
  message.add(people(1)[0]);
  const pmrkit::byte_buffer m = message.finish();
  CHECK(pmrkit::bson::parse_op_msg(m.span()).sequence(0).documents.count() == 1);
}

TEST_CASE("insert_message enforces the message and document size limits", "[bson][insert]") {
  pmrkit::buffer_pool pool;
  const auto docs = people(20);
  pmrkit::bson::insert_options options;
  options.max_message_bytes = 1000;
  options.max_document_bytes = 200;
  insert_builder builder(pool, options);
  auto message = builder.begin("db", "c");
  std::size_t added = 0;
  for (const auto& d : docs) {
    if (!message.fits(d.size())) {
      CHECK_THROWS_AS(message.add(d), pmrkit::bson::message_too_large);
      break;
    }
    message.add(d);
    ++added;
  }
  CHECK(added > 0);
  CHECK(added < docs.size());
  const pmrkit::byte_buffer m = message.finish();
  CHECK(m.size() <= 1000);
  CHECK(pmrkit::bson::parse_op_msg(m.span()).sequence(0).documents.count() == added);

  auto other = builder.begin("db", "c");
  const std::vector<std::byte> big(300, std::byte{0});
  CHECK_THROWS_AS(other.add(big), pmrkit::bson::message_too_large);

  pmrkit::bson::insert_options impossible;
  impossible.max_message_bytes = 10;
  CHECK_THROWS_AS(insert_builder(pool, impossible), std::invalid_argument);
}

TEST_CASE("request ids count up per builder", "[bson][insert]") {
  pmrkit::buffer_pool pool;
  insert_builder builder(pool);
  const auto docs = people(1);
  for (std::int32_t expected = 1; expected <= 3; ++expected) {
    const pmrkit::byte_buffer m = builder.build("db", "c", spans(docs));
    CHECK(i32_at(m, 4) == expected);
  }
}
