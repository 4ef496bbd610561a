// The wire check span_parser makes before libprotobuf parses a datagram: libprotobuf must
// never log a line for a string that is not UTF-8, and the check must refuse nothing that
// libprotobuf accepts; and what it finds to have unknown fields is copied without them into
// bytes that libprotobuf parses into the same span. All are compared with libprotobuf's own
// parser of the generated message.
#include "span_wire_check.hpp"

#include <google/protobuf/stubs/logging.h>

#include <catch2/catch.hpp>

#include <cstddef>
#include <cstdint>
#include <random>
#include <string>
#include <vector>

#include "deterministic_bytes.hpp"
#include "pmrkit/buffer_pool.hpp"
#include "pmrkit/protobuf/span_codec.hpp"
#include "pmrkit/ssf/span.pb.h"

namespace {

using bytes = std::string;
namespace pb = pmrkit::protobuf;

// Counts libprotobuf's log lines while it lives (its handler is the process's: this program's
// own, single-threaded).
class log_lines {
 public:
  log_lines() : previous_(::google::protobuf::SetLogHandler(&count)) { lines = 0; }
  ~log_lines() { ::google::protobuf::SetLogHandler(previous_); }
  log_lines(const log_lines&) = delete;
  log_lines& operator=(const log_lines&) = delete;
  int seen() const { return lines; }

 private:
  static void count(::google::protobuf::LogLevel, const char*, int, const std::string&) {
    ++lines;
  }
  static inline int lines = 0;
  ::google::protobuf::LogHandler* previous_;
};

bytes varint(std::uint64_t value) {
  bytes out;
  while (value >= 0x80) {
    out += static_cast<char>(value | 0x80);
    value >>= 7;
  }
  out += static_cast<char>(value);
  return out;
}

bytes tag(std::uint32_t number, std::uint32_t wire_type) { return varint(number << 3 | wire_type); }
bytes length_field(std::uint32_t number, const bytes& payload) {
  return tag(number, 2) + varint(payload.size()) + payload;
}
bytes entry(const bytes& key, const bytes& value) {
  return length_field(1, key) + length_field(2, value);
}

std::span<const std::byte> as_wire(const bytes& b) {
  return {reinterpret_cast<const std::byte*>(b.data()), b.size()};
}

using pmrkit::protobuf::detail::span_wire;

span_wire verdict(const bytes& b) { return pmrkit::protobuf::detail::check_span_wire(as_wire(b)); }
bool check(const bytes& b) { return verdict(b) != span_wire::refused; }

bytes without_unknown_fields(const bytes& b) {
  bytes out(b.size(), '\0');
  const std::size_t size = pmrkit::protobuf::detail::copy_without_unknown_fields(
      as_wire(b), reinterpret_cast<std::byte*>(out.data()));
  REQUIRE(size <= b.size());
  out.resize(size);
  return out;
}

using pmrkit::test::deterministic_bytes;

bool has_unknown_fields(const pmrkit::ssf::SSFSpan& span) {
  if (!span.GetReflection()->GetUnknownFields(span).empty()) return true;
  for (const auto& sample : span.metrics()) {
    if (!sample.GetReflection()->GetUnknownFields(sample).empty()) return true;
  }
  return false;
}

struct libprotobuf_verdict {
  bool parsed;
  int log_lines;
};

libprotobuf_verdict libprotobuf_parse(const bytes& b) {
  log_lines lines;
  pmrkit::ssf::SSFSpan message;
  const bool parsed = message.ParseFromArray(b.data(), static_cast<int>(b.size()));
  return {parsed, lines.seen()};
}

// What the check promises: it refuses only what libprotobuf refuses, and libprotobuf never logs
// on what it accepts; it finds every field that libprotobuf would keep as unknown, and the copy
// without them parses into the same span.
void agrees_with_libprotobuf(const bytes& b) {
  const span_wire found = verdict(b);
  const libprotobuf_verdict libprotobuf = libprotobuf_parse(b);
  INFO("datagram of " << b.size() << " bytes; verdict " << static_cast<int>(found)
                      << ", libprotobuf parsed " << libprotobuf.parsed << " and logged "
                      << libprotobuf.log_lines);
  if (found == span_wire::refused) {
    CHECK_FALSE(libprotobuf.parsed);
    return;
  }
  CHECK(libprotobuf.log_lines == 0);
  // Not refused is parsed: the parser's copy without unknown fields must not make a datagram
  // libprotobuf refuses into one it parses.
  REQUIRE(libprotobuf.parsed);
  pmrkit::ssf::SSFSpan original;
  REQUIRE(original.ParseFromArray(b.data(), static_cast<int>(b.size())));
  CHECK(has_unknown_fields(original) == (found == span_wire::valid_with_unknown_fields));
  if (found == span_wire::valid) return;
  const bytes known = without_unknown_fields(b);
  CHECK(verdict(known) == span_wire::valid);
  pmrkit::ssf::SSFSpan stripped;
  REQUIRE(stripped.ParseFromArray(known.data(), static_cast<int>(known.size())));
  CHECK_FALSE(has_unknown_fields(stripped));
  original.DiscardUnknownFields();
  CHECK(deterministic_bytes(original) == deterministic_bytes(stripped));
}

const bytes bad = "\xff\xfe";  // never UTF-8
const bytes good = "ok";

// Every field set (proto3 leaves out a field at its default), so that each is on the wire.
pb::span example_span() {
  pb::span s;
  s.version = 1;
  s.trace_id = 42;
  s.id = 43;
  s.parent_id = 41;
  s.start_timestamp = 1'700'000'000'000'000'000;
  s.end_timestamp = 1'700'000'000'000'000'100;
  s.error = true;
  s.indicator = true;
  s.service = "checkout-service";
  s.name = "POST /orders";
  s.tags = {{"env", "production"}, {"region", "eu-west-1"}};
  for (int i = 0; i < 2; ++i) {
    pb::sample m;
    m.name = "db.query.count";
    m.message = "slow";
    m.unit = "ms";
    m.metric = pb::metric_type::histogram;
    m.value = 1.5f;
    m.timestamp = 1'700'000'000;
    m.status = pb::sample_status::warning;
    m.sample_rate = 0.5f;
    m.tags = {{"status_code", "201"}};
    s.metrics.push_back(m);
  }
  return s;
}

}  // namespace

TEST_CASE("a string that is not UTF-8 anywhere in a span is refused, libprotobuf silent",
          "[protobuf]") {
  const std::vector<std::pair<const char*, bytes>> cases{
      {"service", length_field(8, bad)},
      {"name", length_field(13, bad)},
      {"tag key", length_field(11, entry(bad, good))},
      {"tag value", length_field(11, entry(good, bad))},
      {"metric name", length_field(10, length_field(2, bad))},
      {"metric message", length_field(10, length_field(5, bad))},
      {"metric unit", length_field(10, length_field(9, bad))},
      {"metric tag key", length_field(10, length_field(8, entry(bad, good)))},
      {"metric tag value", length_field(10, length_field(8, entry(good, bad)))},
      // Every occurrence counts, not only the last one that the message keeps.
      {"a name set twice, first not UTF-8", length_field(13, bad) + length_field(13, good)},
      {"a tag key set twice within its entry",
       length_field(11, length_field(1, bad) + length_field(1, good))},
  };
  pmrkit::buffer_pool pool;
  pb::span_parser parser(pool);
  for (const auto& [where, wire] : cases) {
    INFO(where);
    CHECK_FALSE(check(wire));
    const libprotobuf_verdict libprotobuf = libprotobuf_parse(wire);
    CHECK_FALSE(libprotobuf.parsed);
    CHECK(libprotobuf.log_lines == 1);  // what a daemon would write for each such datagram

    const auto errors = parser.stats().parse_errors;
    log_lines lines;
    CHECK_FALSE(parser.parse(as_wire(wire), [](const pb::span_view&) {}));
    CHECK(lines.seen() == 0);
    CHECK(parser.stats().parse_errors == errors + 1);
  }
  CHECK(parser.stats().parsed == 0);
}

TEST_CASE("bytes libprotobuf does not read as text may be anything", "[protobuf]") {
  const std::vector<std::pair<const char*, bytes>> cases{
      {"an unknown field", length_field(99, bad)},
      {"the name's number as a varint", tag(13, 0) + varint(300)},
      {"an unknown field in a metric", length_field(10, length_field(4000, bad))},
      {"an unknown field in a tag entry",
       length_field(11, entry(good, good) + length_field(3, bad))},
      {"text in an unknown group", tag(20, 3) + length_field(13, bad) + tag(20, 4)},
      {"groups in groups", tag(20, 3) + tag(21, 3) + tag(21, 4) + tag(20, 4)},
      {"a tag in five bytes", bytes("\xea\x80\x80\x80\x00", 5) + varint(2) + good},
      {"fixed-width fields", tag(30, 1) + bytes(8, 'x') + tag(31, 5) + bytes(4, 'y')},
  };
  for (const auto& [where, wire] : cases) {
    INFO(where);
    CHECK(check(wire));
    const libprotobuf_verdict libprotobuf = libprotobuf_parse(wire);
    CHECK(libprotobuf.parsed);
    CHECK(libprotobuf.log_lines == 0);
  }
}

TEST_CASE("the wire check refuses what libprotobuf refuses as malformed", "[protobuf]") {
  const std::vector<std::pair<const char*, bytes>> cases{
      {"tag 0", tag(0, 0) + varint(1)},
      {"field number 0", tag(0, 2) + varint(2) + good},
      {"an end-group tag with no group", tag(5, 4)},
      {"a group ended under another number", tag(20, 3) + tag(21, 4)},
      {"a group never ended", tag(20, 3) + tag(1, 0) + varint(1)},
      {"a length past the end", tag(13, 2) + varint(10) + good},
      {"a metric whose text overruns it", length_field(10, tag(2, 2) + varint(5) + good)},
      {"wire type 7", tag(40, 7)},
      {"a varint of eleven bytes", tag(1, 0) + bytes(10, '\x80') + bytes(1, '\x01')},
      {"a tag of six bytes", bytes("\x80\x80\x80\x80\x80\x01", 6)},
      {"a length of six bytes", tag(13, 2) + bytes("\x82\x80\x80\x80\x80\x00", 6) + good},
      // 2 plus 16 << 28, which 32 bits would wrap to 2.
      {"a length's fifth byte past 7", tag(13, 2) + bytes("\x82\x80\x80\x80\x10", 5) + good},
  };
  for (const auto& [where, wire] : cases) {
    INFO(where);
    CHECK_FALSE(check(wire));
    CHECK_FALSE(libprotobuf_parse(wire).parsed);
  }
  // libprotobuf allows 100 levels of messages and groups, counted from the span; the check
  // allows exactly as many, so that neither refuses what the other parses.
  const auto groups = [](int depth) {
    bytes nested;
    for (int i = 0; i < depth; ++i) nested = tag(20, 3) + nested + tag(20, 4);
    return nested;
  };
  for (const auto& [depth, wire] : std::vector<std::pair<int, bytes>>{
           {100, groups(100)},
           {101, groups(101)},
           {100, length_field(10, groups(99))},
           {101, length_field(10, groups(100))},
           {100, length_field(10, length_field(8, groups(98)))},
           {101, length_field(10, length_field(8, groups(99)))},
       }) {
    INFO("nested " << depth << " deep");
    CHECK(libprotobuf_parse(wire).parsed == (depth <= 100));
    CHECK(check(wire) == (depth <= 100));
  }
}

TEST_CASE("fields libprotobuf would keep as unknown are found and dropped, at every level",
          "[protobuf]") {
  const bytes sample = length_field(2, good) + tag(3, 5) + bytes(4, '\0');
  const std::vector<std::pair<const char*, bytes>> cases{
      {"SSF's old operation field", length_field(13, good) + length_field(9, good)},
      {"a varint of an unknown number", tag(100, 0) + varint(7)},
      {"a known number with another wire type", tag(1, 2) + varint(1) + "x"},
      {"a group", tag(20, 3) + tag(1, 0) + varint(1) + tag(20, 4)},
      {"in a sample", length_field(10, sample + tag(99, 1) + bytes(8, 'x'))},
      {"a float sent as a varint", length_field(10, tag(3, 0) + varint(1))},
  };
  for (const auto& [where, wire] : cases) {
    INFO(where);
    CHECK(verdict(wire) == span_wire::valid_with_unknown_fields);
    agrees_with_libprotobuf(wire);
  }
  // libprotobuf drops a tag entry's unknown fields itself, so they cost nothing.
  CHECK(verdict(length_field(11, entry(good, good) + tag(3, 0) + varint(1))) == span_wire::valid);
  // Known fields only, each of every type.
  pmrkit::buffer_pool pool;
  pb::span_encoder encoder(pool);
  const pmrkit::byte_buffer encoded = encoder.encode(example_span());
  CHECK(verdict(bytes(reinterpret_cast<const char*>(encoded.data()), encoded.size())) ==
        span_wire::valid);
}

TEST_CASE("the wire check agrees with libprotobuf on spans damaged at random", "[protobuf]") {
  pmrkit::buffer_pool pool;
  pb::span_encoder encoder(pool);
  const pmrkit::byte_buffer encoded = encoder.encode(example_span());
  const bytes original(reinterpret_cast<const char*>(encoded.data()), encoded.size());
  REQUIRE(check(original));
  std::mt19937 rng(1201);
  int accepted = 0;
  int refused_as_text = 0;
  int with_unknown_fields = 0;
  for (int i = 0; i < 20'000; ++i) {
    bytes damaged = original;
    const int edits = 1 + static_cast<int>(rng() % 3);
    for (int e = 0; e < edits; ++e) {
      const std::size_t at = rng() % damaged.size();
      switch (rng() % 4) {
        case 0: damaged[at] = static_cast<char>(rng()); break;
        case 1: damaged[at] = static_cast<char>(0x80 | rng()); break;  // text turns non-UTF-8
        case 2: damaged.erase(at, 1 + rng() % 4); break;
        default: damaged.insert(at, 1, static_cast<char>(rng())); break;
      }
      if (damaged.empty()) damaged = original;
    }
    agrees_with_libprotobuf(damaged);
    const span_wire found = verdict(damaged);
    accepted += found != span_wire::refused;
    with_unknown_fields += found == span_wire::valid_with_unknown_fields;
    refused_as_text += found == span_wire::refused && libprotobuf_parse(damaged).log_lines > 0;
  }
  // Each outcome is common, so the comparisons above are not vacuous.
  CHECK(accepted > 1'000);
  CHECK(refused_as_text > 1'000);
  CHECK(with_unknown_fields > 200);
}
