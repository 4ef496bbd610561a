// The BSON value types beyond scalars and strings — Decimal128, regular expression, timestamp,
// min/max key, JavaScript code, an already-encoded array, an ObjectId parsed from hex: pmrkit
// writes each byte for byte as pymongo encodes the same value (encode_values.py), libbson reads
// each back as the type and value written, and bad input is refused with a message saying what
// was wrong, leaving the document as it was.
#include <bson/bson.h>

#include <catch2/catch.hpp>

#include <cstdio>
#include <functional>
#include <map>
#include <sstream>
#include <string>
#include <string_view>
#include <vector>

#include "global_heap.hpp"
#include "pmrkit/bson/document.hpp"
#include "pmrkit/bson/op_msg_reader.hpp"
#include "pmrkit/bson/value_types.hpp"
#include "shell_quote.hpp"

namespace {

using Catch::Matchers::Contains;
using pmrkit::bson::decimal128;
using pmrkit::bson::document;
using pmrkit::bson::object_id;
using pmrkit::bson::timestamp;

std::vector<std::byte> to_vector(std::span<const std::byte> s) { return {s.begin(), s.end()}; }

std::string to_hex(std::span<const std::byte> bytes) {
  std::string out;
  char two[3];
  for (const std::byte b : bytes) {
    std::snprintf(two, sizeof two, "%02x", static_cast<unsigned>(b));
    out += two;
  }
  return out;
}

// The encoded bytes of a document filled by `fill`, after checking they are well-formed by
// pmrkit's reader and by libbson's.
std::string encoded_hex(const std::function<void(document&)>& fill) {
  document d;
  fill(d);
  CHECK(d.size() == d.bytes().size());  // the size kept while appending is the real one
  CHECK_NOTHROW(pmrkit::bson::validate_document(d.bytes()));
  bson_t view;
  REQUIRE(bson_init_static(&view, reinterpret_cast<const std::uint8_t*>(d.bytes().data()),
                           d.bytes().size()));
  size_t offset = 0;
  CHECK(bson_validate(&view, BSON_VALIDATE_UTF8, &offset));
  return to_hex(d.bytes());
}

// {"0": 1, "1": "two", "2": {"k": "v"}, "3": [3, [4]], "4": null}, encoded as an array's body.
std::vector<std::byte> mixed_array() {
  document a;
  a.append_int32("0", 1)
      .append_utf8("1", "two")
      .begin_document("2")
      .append_utf8("k", "v")
      .end()
      .begin_array("3")
      .append_int32("", 3)
      .begin_array("")
      .append_int32("", 4)
      .end()
      .end()
      .append_null("4");
  return to_vector(a.bytes());
}

// pmrkit's encoding of each case in encode_values.py, by the same name.
std::map<std::string, std::string> pmrkit_cases() {
  std::map<std::string, std::string> cases;
  const auto decimal = [&](const std::string& text) {
    cases["decimal_" + text] = encoded_hex([&](document& d) {
      d.append_decimal128("v", decimal128::from_string(text));
    });
  };
  for (const char* text : {"1.5", "1.50", "-0", "-0.001234", "1E+3", "Infinity", "-Infinity",
                           "NaN"}) {
    decimal(text);
  }
  cases["decimal_34_digits"] = encoded_hex([](document& d) {
    d.append_decimal128("v", decimal128::from_string("1234567890123456789012345678901234"));
  });
  cases["decimal_smallest"] = encoded_hex([](document& d) {
    d.append_decimal128("v", decimal128::from_string("1E-6176"));
  });
  cases["decimal_largest"] = encoded_hex([](document& d) {
    d.append_decimal128("v", decimal128::from_string("9.999999999999999999999999999999999E+6144"));
  });
  cases["decimal_halves"] = encoded_hex([](document& d) {
    d.append_decimal128("v", decimal128{0x3040000000000000, 0x000000000000000F});
  });
  cases["regex_no_options"] = encoded_hex([](document& d) { d.append_regex("v", "^a"); });
  cases["regex_i"] = encoded_hex([](document& d) { d.append_regex("v", "^a", "i"); });
  cases["regex_all_unsorted"] =
      encoded_hex([](document& d) { d.append_regex("v", "a.b+\\d", "xusmli"); });
  cases["regex_repeated"] = encoded_hex([](document& d) { d.append_regex("v", "[x]", "mim"); });
  cases["regex_empty_pattern"] = encoded_hex([](document& d) { d.append_regex("v", "", "s"); });
  cases["timestamp_5_7"] = encoded_hex([](document& d) { d.append_timestamp("v", {5, 7}); });
  cases["timestamp_max"] = encoded_hex([](document& d) {
    d.append_timestamp("v", {UINT32_MAX, UINT32_MAX});
  });
  cases["min_key"] = encoded_hex([](document& d) { d.append_min_key("v"); });
  cases["max_key"] = encoded_hex([](document& d) { d.append_max_key("v"); });
  cases["code"] = encoded_hex([](document& d) { d.append_code("v", "function(){}"); });
  cases["code_empty"] = encoded_hex([](document& d) { d.append_code("v", ""); });
  cases["code_utf8"] = encoded_hex([](document& d) { d.append_code("v", "return 'Zoë';"); });
  cases["array_empty"] = encoded_hex([](document& d) {
    const document empty;
    d.append_array("v", empty.bytes());
  });
  cases["array_mixed"] = encoded_hex([](document& d) { d.append_array("v", mixed_array()); });
  cases["object_id_lower"] = encoded_hex([](document& d) {
    d.append_object_id("v", object_id::from_hex("65a1b2c3d4e5f60718293a4b"));
  });
  cases["object_id_upper"] = encoded_hex([](document& d) {
    d.append_object_id("v", object_id::from_hex("65A1B2C3D4E5F60718293A4B"));
  });
  cases["in_array"] = encoded_hex([](document& d) {
    document seven;
    seven.append_int32("0", 7);
    d.begin_array("a")
        .append_decimal128("", decimal128::from_string("2.5"))
        .append_regex("", "x", "i")
        .append_timestamp("", {1, 2})
        .append_min_key("")
        .append_max_key("")
        .append_code("", "f()")
        .append_array("", seven.bytes())
        .append_object_id("", object_id::from_hex("000102030405060708090a0b"))
        .end()
        .begin_document("d")
        .append_max_key("m")
        .append_timestamp("t", {9, 0})
        .end();
  });
  return cases;
}

// What `write` throws, given that it throws std::invalid_argument and leaves `d` unchanged.
std::string refusal(document& d, const std::function<void(document&)>& write) {
  const auto before = to_vector(d.bytes());
  std::string message;
  try {
    write(d);
  } catch (const std::invalid_argument& e) {
    message = e.what();
  }
  CHECK_FALSE(message.empty());
  CHECK(to_vector(d.bytes()) == before);
  CHECK(d.size() == before.size());
  return message;
}

}  // namespace

TEST_CASE("every case compared with pymongo is well-formed for pmrkit and libbson",
          "[bson][value_types]") {
  CHECK(pmrkit_cases().size() == 29);  // encoded_hex checks each
}

#if PMRKIT_TEST_HAVE_PYMONGO
TEST_CASE("each value type is encoded byte for byte as pymongo encodes it",
          "[bson][value_types][pymongo]") {
  const std::string command =
      pmrkit::test::shell_quoted(PMRKIT_TEST_PYTHON) + " " + pmrkit::test::shell_quoted(PMRKIT_TEST_ENCODER) + " 2>&1";
  std::string output;
  FILE* p = ::popen(command.c_str(), "r");
  REQUIRE(p != nullptr);
  char chunk[4096];
  for (std::size_t n; (n = std::fread(chunk, 1, sizeof chunk, p)) > 0;) output.append(chunk, n);
  INFO(output);
  REQUIRE(::pclose(p) == 0);

  std::map<std::string, std::string> pymongo;
  std::istringstream in(output);
  for (std::string name, hex; in >> name >> hex;) pymongo[name] = hex;
  const auto ours = pmrkit_cases();
  REQUIRE(pymongo.size() == ours.size());  // the same cases on both sides
  for (const auto& [name, hex] : ours) {
    INFO("case " << name);
    REQUIRE(pymongo.count(name) == 1);
    CHECK(hex == pymongo[name]);
  }
}
#endif

TEST_CASE("libbson reads each value back as the type and value written",
          "[bson][value_types]") {
  const std::string code_with_nul("a\0b", 3);
  document d;
  d.append_decimal128("dec", decimal128::from_string("-12.50"))
      .append_regex("re", std::string_view("^ab$tail", 4), std::string_view("mixed", 2))
      .append_timestamp("ts", {1700000000, 42})
      .append_min_key("min")
      .append_max_key("max")
      .append_code("js", code_with_nul)
      .append_array("arr", mixed_array());
  bson_t view;  // initialised in place: a static bson_t points into itself
  REQUIRE(bson_init_static(&view, reinterpret_cast<const std::uint8_t*>(d.bytes().data()),
                           d.bytes().size()));
  bson_iter_t it;

  REQUIRE(bson_iter_init_find(&it, &view, "dec"));
  REQUIRE(BSON_ITER_HOLDS_DECIMAL128(&it));
  bson_decimal128_t dec;
  REQUIRE(bson_iter_decimal128(&it, &dec));
  char text[BSON_DECIMAL128_STRING];
  bson_decimal128_to_string(&dec, text);
  CHECK(std::string(text) == "-12.50");

  REQUIRE(bson_iter_init_find(&it, &view, "re"));
  REQUIRE(BSON_ITER_HOLDS_REGEX(&it));
  const char* options = nullptr;
  CHECK(std::string(bson_iter_regex(&it, &options)) == "^ab$");
  CHECK(std::string(options) == "im");

  REQUIRE(bson_iter_init_find(&it, &view, "ts"));
  REQUIRE(BSON_ITER_HOLDS_TIMESTAMP(&it));
  std::uint32_t seconds = 0, increment = 0;
  bson_iter_timestamp(&it, &seconds, &increment);
  CHECK(seconds == 1700000000);
  CHECK(increment == 42);

  REQUIRE(bson_iter_init_find(&it, &view, "min"));
  CHECK(BSON_ITER_HOLDS_MINKEY(&it));
  REQUIRE(bson_iter_init_find(&it, &view, "max"));
  CHECK(BSON_ITER_HOLDS_MAXKEY(&it));

  REQUIRE(bson_iter_init_find(&it, &view, "js"));
  REQUIRE(BSON_ITER_HOLDS_CODE(&it));
  std::uint32_t length = 0;
  const char* js = bson_iter_code(&it, &length);
  CHECK(std::string(js, length) == code_with_nul);

  REQUIRE(bson_iter_init_find(&it, &view, "arr"));
  REQUIRE(BSON_ITER_HOLDS_ARRAY(&it));
  bson_iter_t child;
  REQUIRE(bson_iter_init(&it, &view));
  REQUIRE(bson_iter_find_descendant(&it, "arr.3.1.0", &child));
  CHECK(bson_iter_int32(&child) == 4);

  size_t offset = 0;
  CHECK(bson_validate(&view, BSON_VALIDATE_NONE, &offset));
  CHECK(d.size() == d.bytes().size());
}

TEST_CASE("decimal128 parses the string form into the BID halves", "[bson][value_types]") {
  // 1.5 is the coefficient 15 with exponent -1: biased exponent 6176 - 1 = 0x181F, shifted
  // into bits 49..62 of the high half.
  CHECK(decimal128::from_string("1.5") == decimal128{0x303E000000000000, 15});
  CHECK(decimal128::from_string("0") == decimal128{0x3040000000000000, 0});
  CHECK(decimal128::from_string("-Infinity") == decimal128{0xF800000000000000, 0});
  CHECK_FALSE(decimal128::from_string("1.5") == decimal128::from_string("1.50"));
}

TEST_CASE("decimal128::from_string refuses what is not a Decimal128", "[bson][value_types]") {
  for (const std::string& bad :
       {std::string(), std::string("abc"), std::string("1.5x"), std::string("1e"),
        std::string("--1"), std::string("1.5 "), std::string("1.5\0", 4),
        std::string("12345678901234567890123456789012345"),  // 35 digits: would need rounding
        std::string("1E+6145")}) {
    INFO("input \"" << bad << "\"");
    CHECK_THROWS_WITH(decimal128::from_string(bad),
                      Contains("is not a Decimal128") && Contains("34 significant digits"));
  }
  CHECK_THROWS_WITH(decimal128::from_string(std::string(1000, '9')),
                    Contains("(1000 bytes, first 64 shown)"));
}

TEST_CASE("decimal128::from_string reads what pymongo reads, exactly or not at all",
          "[bson][value_types]") {
  // libbson's parser, used before, truncated exponents to 32 bits ("1E4294967297" read as
  // 1E+1) and dropped digits after a leading zero; these values are pymongo's.
  for (const char* inexact : {"1E4294967296", "1E4294967297", "1E-4294967295",
                              "1E9223372036854775808", "0123456789012345678901234567890123.003",
                              "0123456789012345678901234567890123.009", "1E6146", "15E-6177"}) {
    INFO(inexact);
    CHECK_THROWS_AS(decimal128::from_string(inexact), std::invalid_argument);
  }
  CHECK(decimal128::from_string("0E+4294967296") == decimal128{0x5FFE000000000000, 0});
  CHECK(decimal128::from_string("58350012778160921409739332896292250.0") ==
        decimal128{0x30431FB011FB3B4B, 0x134F6DEE43416629});
  CHECK(decimal128::from_string("026394.235204723933419080752922737020") ==
        decimal128{0x30068222355C7383, 0x5B844B4FCD262C26});
  CHECK(decimal128::from_string("1E6112") == decimal128{0x5FFE000000000000, 10});
  CHECK(decimal128::from_string("10E-6177") == decimal128{0, 1});
  CHECK(decimal128::from_string("-NaN") == decimal128{0xFC00000000000000, 0});
  CHECK(decimal128::from_string("sNaN") == decimal128{0x7E00000000000000, 0});
}

TEST_CASE("decimal128::from_string reads its view and nothing past it", "[bson][value_types]") {
  // libbson read parts of the text (the exponent, "Infinity", "NaN") up to a NUL, past the end
  // of the view: "1.5" cut from "1.5e5" parsed as 1.5E+5, and an empty view at null crashed.
  const std::string_view longer = "1.5e5";
  CHECK(decimal128::from_string(longer.substr(0, 3)) == decimal128::from_string("1.5"));
  CHECK(decimal128::from_string(std::string_view("1e5123").substr(0, 3)) ==
        decimal128::from_string("1e5"));
  CHECK(decimal128::from_string(std::string_view("NaN,2").substr(0, 3)) ==
        decimal128::from_string("NaN"));
  CHECK(decimal128::from_string(std::string_view("Infinity 3").substr(0, 8)) ==
        decimal128::from_string("Infinity"));
  CHECK_THROWS_WITH(decimal128::from_string(std::string_view{}), Contains("is not a Decimal128"));
}

TEST_CASE("object_id::from_hex parses either case and refuses anything else",
          "[bson][value_types]") {
  const object_id id = object_id::from_hex("000102030405060708090a0B");
  for (std::size_t i = 0; i < id.bytes.size(); ++i) CHECK(id.bytes[i] == std::byte(i));
  CHECK(object_id::from_hex("ffffffffffffffffffffffff").bytes[11] == std::byte{0xFF});

  CHECK_THROWS_WITH(object_id::from_hex(""), Contains("has 0 characters") &&
                                                 Contains("24 hexadecimal digits"));
  CHECK_THROWS_WITH(object_id::from_hex("000102030405060708090a0"), Contains("has 23 characters"));
  CHECK_THROWS_WITH(object_id::from_hex("000102030405060708090a0b0"),
                    Contains("has 25 characters"));
  CHECK_THROWS_WITH(object_id::from_hex("00010203040506070809 a0b"),
                    Contains("non-hexadecimal character at position 20") &&
                        Contains("0-9, a-f, A-F"));
  CHECK_THROWS_WITH(object_id::from_hex("g00102030405060708090a0b"),
                    Contains("at position 0"));
  CHECK_THROWS_WITH(object_id::from_hex(std::string_view("0001020304050607\0" "8090a0b", 24)),
                    Contains("\\x00") && Contains("at position 16"));
  CHECK_THROWS_WITH(object_id::from_hex("0x0102030405060708090a0b"), Contains("at position 1"));
}

TEST_CASE("append_regex refuses NUL in the pattern and unknown options", "[bson][value_types]") {
  document d;
  d.append_int32("kept", 1);
  CHECK_THAT(refusal(d, [](document& x) { x.append_regex("r", std::string_view("a\0b", 3)); }),
             Contains("pattern contains NUL"));
  CHECK_THAT(refusal(d, [](document& x) { x.append_regex("r", "a", "iq"); }),
             Contains("i, l, m, s, u, x") && Contains("'q' at position 1"));
  CHECK_THAT(refusal(d, [](document& x) { x.append_regex("r", "a", "I"); }),
             Contains("'I' at position 0"));
  CHECK_THAT(refusal(d, [](document& x) { x.append_regex("r", "a", std::string_view("\0", 1)); }),
             Contains("byte 0x00 at position 0"));
}

TEST_CASE("append_array takes only a well-formed document keyed 0, 1, ...",
          "[bson][value_types]") {
  document d;
  d.append_int32("kept", 1);

  document named;
  named.append_int32("0", 1).append_int32("x", 2);
  CHECK_THAT(refusal(d, [&](document& x) { x.append_array("a", named.bytes()); }),
             Contains("element 1 has key \"x\"") && Contains("\"0\", \"1\", ... in order"));
  document out_of_order;
  out_of_order.append_int32("1", 1).append_int32("0", 2);
  CHECK_THAT(refusal(d, [&](document& x) { x.append_array("a", out_of_order.bytes()); }),
             Contains("element 0 has key \"1\""));
  document leading_zero;
  leading_zero.append_int32("00", 1);
  CHECK_THAT(refusal(d, [&](document& x) { x.append_array("a", leading_zero.bytes()); }),
             Contains("element 0 has key \"00\""));

  std::vector<std::byte> truncated = mixed_array();
  truncated.pop_back();
  CHECK_THAT(refusal(d, [&](document& x) { x.append_array("a", truncated); }),
             Contains("append_array: BSON document"));

  // Keys of arrays nested inside are the caller's business, as the header says.
  document nested_named;
  nested_named.begin_document("0").append_int32("x", 1).end();
  d.append_array("ok", nested_named.bytes());
  CHECK(d.size() == d.bytes().size());
  CHECK_NOTHROW(pmrkit::bson::validate_document(d.bytes()));
}

TEST_CASE("the new appends refuse bad keys like the others", "[bson][value_types]") {
  document d;
  d.begin_array("list");
  CHECK_THROWS_AS(d.append_min_key("named"), std::invalid_argument);
  CHECK_THROWS_AS(d.append_code("named", "x"), std::invalid_argument);
  CHECK_THROWS_AS(d.end().append_timestamp(std::string_view("t\0", 2), {}), std::invalid_argument);
  CHECK(d.size() == d.bytes().size());
}

TEST_CASE("the value factories allocate nothing", "[bson][value_types]") {
  // Longer than std::string keeps inline: a copy of it would show here.
  const std::string_view long_decimal = "-1234567890.123456789012345678901234E+12";
  const auto before = pmrkit::test::global_heap::allocations();
  const decimal128 d = decimal128::from_string(long_decimal);
  CHECK(pmrkit::test::global_heap::allocations() == before);
  CHECK(d.high != 0);
}
