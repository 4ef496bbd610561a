// bench/json_text.hpp: the one escaping rule of the JSON that pmrkit_bench, pmrkit_interleaved
// and pmrkit-replay write, which bench/report parses with Python's json module.
#include "json_text.hpp"

#include <catch2/catch.hpp>
#include <string>

using pmrkit::bench::json_string;

TEST_CASE("json_string quotes plain text as it is") {
  CHECK(json_string("") == "\"\"");
  CHECK(json_string("size_class:max_pooled=128K") == "\"size_class:max_pooled=128K\"");
}

TEST_CASE("json_string escapes quotes, backslashes and control characters") {
  CHECK(json_string("a\"b") == "\"a\\\"b\"");
  CHECK(json_string("C:\\trace") == "\"C:\\\\trace\"");
  CHECK(json_string("line\nnext\ttab") == "\"line\\u000anext\\u0009tab\"");
  CHECK(json_string(std::string("nul\0end", 7)) == "\"nul\\u0000end\"");
  CHECK(json_string("\x1f") == "\"\\u001f\"");
}

TEST_CASE("json_string passes UTF-8 and DEL through") {
  // Bytes from 0x7f up are not control characters to JSON; escaping them one by one as \u00XX
  // would turn a UTF-8 name into Latin-1 mojibake.
  CHECK(json_string("caf\xc3\xa9") == "\"caf\xc3\xa9\"");
  CHECK(json_string("\x7f") == "\"\x7f\"");
}
