// pmrkit::bson::document: what it encodes is exactly what libbson encodes itself, it validates,
// and every byte of its storage comes from (and returns to) the resource it was given.
#include <bson/bson.h>

#include <catch2/catch.hpp>

#include <cstring>
#include <string>
#include <vector>

#include "pmrkit/bson/document.hpp"
#include "pmrkit/bson/op_msg_reader.hpp"
#include "pmrkit/checked_resource.hpp"
#include "pmrkit/counting_resource.hpp"
#include "test_resources.hpp"

namespace {

using pmrkit::bson::document;
using pmrkit::bson::object_id;

std::vector<std::byte> to_vector(std::span<const std::byte> s) { return {s.begin(), s.end()}; }

std::vector<std::byte> to_vector(const bson_t* b) {
  const auto* p = reinterpret_cast<const std::byte*>(bson_get_data(b));
  return {p, p + b->len};
}

object_id sample_id() {
  object_id id;
  for (std::size_t i = 0; i < id.bytes.size(); ++i) id.bytes[i] = std::byte(0x10 + i);
  return id;
}

void encode_sample(document& d) {
  d.append_object_id("_id", sample_id())
      .append_utf8("name", "Ada Lovelace")
      .append_int32("age", 36)
      .append_int64("visits", 1234567890123)
      .append_double("score", 98.5)
      .append_bool("active", true)
      .append_date_time("joined", 1700000000123)
      .append_null("manager")
      .begin_document("address")
      .append_utf8("city", "London")
      .append_int32("zip", 12345)
      .end()
      .begin_array("tags")
      .append_utf8("", "math")
      .append_utf8("", "engines")
      .begin_document("")
      .append_bool("nested", false)
      .end()
      .end();
}

// The same document through libbson's own API, as a reference.
bson_t* libbson_sample() {
  bson_t* b = bson_new();
  bson_oid_t oid;
  const object_id id = sample_id();
  std::memcpy(oid.bytes, id.bytes.data(), 12);
  BSON_APPEND_OID(b, "_id", &oid);
  BSON_APPEND_UTF8(b, "name", "Ada Lovelace");
  BSON_APPEND_INT32(b, "age", 36);
  BSON_APPEND_INT64(b, "visits", 1234567890123);
  BSON_APPEND_DOUBLE(b, "score", 98.5);
  BSON_APPEND_BOOL(b, "active", true);
  BSON_APPEND_DATE_TIME(b, "joined", 1700000000123);
  BSON_APPEND_NULL(b, "manager");
  bson_t address, tags, inner;
  BSON_APPEND_DOCUMENT_BEGIN(b, "address", &address);
  BSON_APPEND_UTF8(&address, "city", "London");
  BSON_APPEND_INT32(&address, "zip", 12345);
  bson_append_document_end(b, &address);
  BSON_APPEND_ARRAY_BEGIN(b, "tags", &tags);
  BSON_APPEND_UTF8(&tags, "0", "math");
  BSON_APPEND_UTF8(&tags, "1", "engines");
  BSON_APPEND_DOCUMENT_BEGIN(&tags, "2", &inner);
  BSON_APPEND_BOOL(&inner, "nested", false);
  bson_append_document_end(&tags, &inner);
  bson_append_array_end(b, &tags);
  return b;
}

bool libbson_validates(std::span<const std::byte> bytes) {
  bson_t view;
  if (!bson_init_static(&view, reinterpret_cast<const std::uint8_t*>(bytes.data()),
                        bytes.size())) {
    return false;
  }
  size_t offset = 0;
  return bson_validate(&view, BSON_VALIDATE_UTF8, &offset);
}

}  // namespace

TEST_CASE("document encodes byte for byte what libbson's own API encodes", "[bson][document]") {
  document d;
  encode_sample(d);
  bson_t* reference = libbson_sample();
  CHECK(to_vector(d.bytes()) == to_vector(reference));
  CHECK(d.size() == reference->len);
  bson_destroy(reference);
  CHECK(libbson_validates(d.bytes()));
  CHECK_NOTHROW(pmrkit::bson::validate_document(d.bytes()));
}

TEST_CASE("document values read back through libbson's iterator", "[bson][document]") {
  document d;
  encode_sample(d);
  bson_t view;
  REQUIRE(bson_init_static(&view, reinterpret_cast<const std::uint8_t*>(d.bytes().data()),
                           d.bytes().size()));
  bson_iter_t it;
  REQUIRE(bson_iter_init_find(&it, &view, "name"));
  CHECK(std::string(bson_iter_utf8(&it, nullptr)) == "Ada Lovelace");
  REQUIRE(bson_iter_init_find(&it, &view, "visits"));
  CHECK(BSON_ITER_HOLDS_INT64(&it));
  CHECK(bson_iter_int64(&it) == 1234567890123);
  REQUIRE(bson_iter_init_find(&it, &view, "joined"));
  CHECK(bson_iter_date_time(&it) == 1700000000123);
  bson_iter_t child;
  REQUIRE(bson_iter_init(&it, &view));
  REQUIRE(bson_iter_find_descendant(&it, "tags.2.nested", &child));
  CHECK(BSON_ITER_HOLDS_BOOL(&child));
  CHECK_FALSE(bson_iter_bool(&child));
}

TEST_CASE("document storage comes from its resource and all of it goes back", "[bson][document]") {
  pmrkit::counting_resource counted(std::pmr::new_delete_resource());
  {
    document d(&counted, 64);
    const auto after_construction = counted.stats();
    CHECK(after_construction.allocations >= 2);  // the impl and the buffer
    CHECK(d.capacity() >= 64);
    // Grow well past the initial capacity: every growth goes through the resource.
    const std::string big(5000, 'x');
    d.append_utf8("big", big);
    CHECK(d.capacity() >= 5000 + 16);
    CHECK(counted.stats().allocations > after_construction.allocations);
    CHECK(libbson_validates(d.bytes()));

    // clear() keeps the storage: encoding the same again allocates nothing.
    const auto capacity = d.capacity();
    d.clear();
    CHECK(d.size() == 5);
    const auto before = counted.stats().allocations;
    d.append_utf8("big", big);
    CHECK(counted.stats().allocations == before);
    CHECK(d.capacity() == capacity);
  }
  CHECK(counted.stats().bytes_in_use == 0);
  CHECK(counted.stats().blocks_in_use() == 0);
}

TEST_CASE("a document appends views of its own bytes, though the append grows it",
          "[bson][document]") {
  // The growth used to free the block the views lay in before libbson read them; over a
  // checked resource a freed block is poisoned at once, so such a read shows in the bytes.
  pmrkit::checked_resource checked(std::pmr::new_delete_resource());
  const std::string text(40, 't');
  {
    document d(&checked, 64);
    d.append_utf8("s", text);
    const std::vector<std::byte> before(d.bytes().begin(), d.bytes().end());
    d.append_document("self", d.bytes());  // larger than the room left: the append grows d
    const std::span<const std::byte> own = d.bytes();
    const std::string_view own_text(reinterpret_cast<const char*>(own.data()) + 11, 40);
    d.append_utf8(own_text, own_text);  // a key and a value inside d

    document expected(std::pmr::new_delete_resource(), 64);
    expected.append_utf8("s", text);
    expected.append_document("self", before);
    expected.append_utf8(text, text);
    CHECK(std::vector<std::byte>(d.bytes().begin(), d.bytes().end()) ==
          std::vector<std::byte>(expected.bytes().begin(), expected.bytes().end()));
  }
  CHECK(checked.stats().bytes_in_use == 0);
  CHECK(checked.stats().violations == 0);
}

TEST_CASE("a document appends views of its own bytes when it has room for them too",
          "[bson][document]") {
  // Without growth libbson wrote the new element's type byte over the terminator, then copied
  // the value from under it: the nested document ended in 0x03, the binary in 0x05.
  const auto encoded = [](const document& d) {
    return std::vector<std::byte>(d.bytes().begin(), d.bytes().end());
  };
  document d(std::pmr::new_delete_resource(), 4096);
  d.append_int32("a", 1);
  const std::vector<std::byte> before = encoded(d);
  const std::size_t capacity = d.capacity();
  d.append_document("self", d.bytes());
  d.append_binary("bin", d.bytes().first(before.size()));
  const std::span<const std::byte> own = d.bytes();
  d.append_utf8("text", std::string_view(reinterpret_cast<const char*>(own.data()), 4));
  CHECK(d.capacity() == capacity);  // no growth: the case this test is for

  document expected(std::pmr::new_delete_resource());
  expected.append_int32("a", 1);
  expected.append_document("self", before);
  const std::vector<std::byte> with_self = encoded(expected);
  expected.append_binary("bin", std::span(with_self).first(before.size()));
  const std::vector<std::byte> with_bin = encoded(expected);
  expected.append_utf8("text",
                       std::string_view(reinterpret_cast<const char*>(with_bin.data()), 4));
  CHECK(encoded(d) == encoded(expected));
}

TEST_CASE("an initial capacity past what BSON holds is refused before any allocation",
          "[bson][document]") {
  // It allocated the 2 GiB first, then libbson refused the buffer with a message naming
  // neither the value nor the bound.
  pmrkit::counting_resource counted(std::pmr::new_delete_resource());
  CHECK_THROWS_WITH(document(&counted, std::size_t{1} << 31),
                    Catch::Contains("initial_capacity 2147483648") &&
                        Catch::Contains("at most 2147483647 bytes"));
  CHECK(counted.stats().allocations == 0);
}

TEST_CASE("a nested document opens the child storage once and reuses it", "[bson][document]") {
  pmrkit::counting_resource counted(std::pmr::new_delete_resource());
  document d(&counted);
  d.begin_document("a").append_int32("x", 1).end();
  const auto allocations = counted.stats().allocations;
  d.clear();
  d.begin_document("a").append_int32("x", 1).end();
  CHECK(counted.stats().allocations == allocations);
}

TEST_CASE("document growth that fails leaves the document as it was", "[bson][document]") {
  pmrkit::test::failing_resource failing(std::pmr::new_delete_resource());
  pmrkit::counting_resource counted(&failing);
  {
    document d(&counted, 32);
    d.append_int32("kept", 7);
    const auto before = to_vector(d.bytes());
    failing.allow(0);
    CHECK_THROWS_AS(d.append_utf8("big", std::string(1000, 'y')), std::bad_alloc);
    CHECK(to_vector(d.bytes()) == before);
    CHECK(d.size() == before.size());
    failing.allow_all();
    d.append_utf8("big", std::string(1000, 'y'));
    CHECK(libbson_validates(d.bytes()));
  }
  CHECK(counted.stats().bytes_in_use == 0);
}

TEST_CASE("document construction that fails leaks nothing", "[bson][document]") {
  pmrkit::test::failing_resource failing(std::pmr::new_delete_resource());
  pmrkit::counting_resource counted(&failing);
  failing.allow(1);  // the impl, then the buffer fails
  CHECK_THROWS_AS(document(&counted), std::bad_alloc);
  CHECK(counted.stats().bytes_in_use == 0);
}

TEST_CASE("document rejects bad keys and nesting mistakes without changing", "[bson][document]") {
  document d;
  d.append_int32("a", 1);
  const auto before = to_vector(d.bytes());
  CHECK_THROWS_AS(d.append_int32(std::string_view("b\0c", 3), 2), std::invalid_argument);
  CHECK_THROWS_AS(d.end(), std::logic_error);
  d.begin_array("list");
  CHECK_THROWS_AS(d.append_int32("named", 1), std::invalid_argument);
  CHECK_THROWS_AS(d.bytes(), std::logic_error);
  CHECK(d.depth() == 1);
  d.end();
  CHECK(d.depth() == 0);
  CHECK(libbson_validates(d.bytes()));
  CHECK(d.bytes().size() == before.size() + 1 + 5 + 5);  // "list" as an empty array

  document deep;
  for (std::size_t i = 0; i < document::max_depth; ++i) deep.begin_document("d");
  CHECK_THROWS_AS(deep.begin_document("d"), std::logic_error);
  for (std::size_t i = 0; i < document::max_depth; ++i) deep.end();
  CHECK(libbson_validates(deep.bytes()));
}

TEST_CASE("clear() with containers still open gives an empty, usable document",
          "[bson][document]") {
  document d;
  d.begin_document("a").begin_array("b").append_int32("", 1);
  d.clear();
  CHECK(d.depth() == 0);
  CHECK(d.size() == 5);
  CHECK(d.bytes().size() == 5);
  d.append_int32("x", 1);
  CHECK(libbson_validates(d.bytes()));
  CHECK(d.bytes().size() == 5 + 1 + 2 + 4);
}

TEST_CASE("append_document nests an encoded document and checks it first", "[bson][document]") {
  document inner;
  inner.append_utf8("k", "v");
  document outer;
  outer.append_document("inner", inner.bytes());
  CHECK(libbson_validates(outer.bytes()));
  CHECK(outer.size() == outer.bytes().size());

  std::vector<std::byte> broken = to_vector(inner.bytes());
  broken[0] = std::byte{99};  // length prefix disagrees
  CHECK_THROWS_AS(outer.append_document("bad", broken), std::invalid_argument);
  CHECK(libbson_validates(outer.bytes()));
}

TEST_CASE("binary values, including the old subtype 2, match libbson", "[bson][document]") {
  const std::byte payload[] = {std::byte{1}, std::byte{2}, std::byte{3}};
  document d;
  d.append_binary("generic", payload).append_binary("old", payload, 0x02);
  CHECK(d.size() == d.bytes().size());
  CHECK_NOTHROW(pmrkit::bson::validate_document(d.bytes()));
  CHECK(libbson_validates(d.bytes()));
}

TEST_CASE("a moved document keeps its contents; the moved-from one refuses use",
          "[bson][document]") {
  pmrkit::counting_resource counted(std::pmr::new_delete_resource());
  {
    document a(&counted);
    a.append_int32("x", 5);
    const auto bytes = to_vector(a.bytes());
    document b(std::move(a));
    CHECK(to_vector(b.bytes()) == bytes);
    CHECK_THROWS_AS(a.append_int32("y", 1), std::logic_error);  // NOLINT(bugprone-use-after-move)
    document c(&counted);
    c = std::move(b);
    CHECK(to_vector(c.bytes()) == bytes);
  }
  CHECK(counted.stats().bytes_in_use == 0);
}

TEST_CASE("move assignment frees the old storage once and keeps the new one whole",
          "[bson][document][move]") {
  pmrkit::counting_resource first(std::pmr::new_delete_resource());
  pmrkit::counting_resource second(std::pmr::new_delete_resource());
  {
    document target(&first);
    target.begin_document("nested").append_int32("old", 1);  // child storage too
    document source(&second);
    source.append_int32("x", 5);
    const auto expected = to_vector(source.bytes());
    target = std::move(source);  // over a live object
    CHECK(first.stats().bytes_in_use == 0);
    CHECK(first.stats().blocks_in_use() == 0);
    CHECK(to_vector(target.bytes()) == expected);

    document& same = target;
    target = std::move(same);  // self-move: a no-op
    CHECK(to_vector(target.bytes()) == expected);

    source = std::move(target);  // into a moved-from object, and back
    target = std::move(source);
    target.append_int32("y", 6);  // still growable, through its own resource
    CHECK(to_vector(target.bytes()).size() > expected.size());
  }
  CHECK(first.stats().deallocations == first.stats().allocations);
  CHECK(second.stats().deallocations == second.stats().allocations);
  CHECK(second.stats().bytes_in_use == 0);
}

TEST_CASE("object_id::generate gives distinct ids", "[bson][document]") {
  const object_id a = object_id::generate();
  const object_id b = object_id::generate();
  CHECK_FALSE(a == b);
}
