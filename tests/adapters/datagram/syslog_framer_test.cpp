#include "pmrkit/datagram/syslog_framer.hpp"

#include <catch2/catch.hpp>

#include <random>
#include <string>
#include <vector>

#include "net_test_support.hpp"
#include "pmrkit/buffer_pool.hpp"
#include "pmrkit/counting_resource.hpp"
#include "pmrkit/datagram/errors.hpp"
#include "test_resources.hpp"

namespace {

using namespace pmrkit::datagram;
using pmrkit::test::net::as_bytes;
using pmrkit::test::net::as_string;

struct result {
  std::vector<std::string> frames;
  framing_error error = framing_error::none;
};

// Feeds `stream` in chunks whose sizes cycle through `chunk_sizes` (each a separate copy, so
// ASan sees any read past a chunk).
result frame(const std::string& stream, std::vector<std::size_t> chunk_sizes,
             framer_options options = {}, pmrkit::buffer_pool* pool = nullptr) {
  pmrkit::buffer_pool local;
  syslog_framer framer(pool ? *pool : local, options);
  result r;
  std::size_t at = 0;
  for (std::size_t i = 0; at < stream.size() && r.error == framing_error::none; ++i) {
    const std::size_t n = std::min(chunk_sizes[i % chunk_sizes.size()], stream.size() - at);
    const std::vector<std::byte> chunk(reinterpret_cast<const std::byte*>(stream.data()) + at,
                                       reinterpret_cast<const std::byte*>(stream.data()) + at + n);
    r.error =
        framer.feed(chunk, [&](std::span<const std::byte> f) { r.frames.push_back(as_string(f)); });
    at += n;
  }
  return r;
}

result frame_whole(const std::string& stream, framer_options options = {}) {
  return frame(stream, {stream.size() + 1}, options);
}

TEST_CASE("syslog_framer splits octet-counted frames, newlines inside them included", "[framer]") {
  const auto r = frame_whole("5 hello12 <13>a\nb c de3 xyz");
  CHECK(r.error == framing_error::none);
  CHECK(r.frames == std::vector<std::string>{"hello", "<13>a\nb c de", "xyz"});
}

TEST_CASE("syslog_framer splits newline-delimited frames and drops CR before LF", "[framer]") {
  const auto r = frame_whole("<13>one\n<13>two\r\n\n\n<13>three\n");
  CHECK(r.error == framing_error::none);
  CHECK(r.frames == std::vector<std::string>{"<13>one", "<13>two", "<13>three"});
}

TEST_CASE("syslog_framer in automatic mode decides per frame", "[framer]") {
  const auto r = frame_whole("<13>line\n4 abcd\n<14>next\n2 xy");
  CHECK(r.error == framing_error::none);
  CHECK(r.frames == std::vector<std::string>{"<13>line", "abcd", "<14>next", "xy"});
}

TEST_CASE("syslog_framer gives the same frames however the stream is cut", "[framer]") {
  const std::string stream = "13 <13>hello\nyou<14>newline frame\r\n3 abc\n\n7 1234567<15>x\n";
  const std::vector<std::string> expected{"<13>hello\nyou", "<14>newline frame", "abc", "1234567",
                                          "<15>x"};
  for (std::size_t chunk = 1; chunk <= stream.size(); ++chunk) {
    INFO("chunk size " << chunk);
    const auto r = frame(stream, {chunk});
    CHECK(r.error == framing_error::none);
    CHECK(r.frames == expected);
  }
  // Every single cut point, two chunks.
  for (std::size_t cut = 0; cut <= stream.size(); ++cut) {
    INFO("cut at " << cut);
    const auto r = frame(stream, {cut == 0 ? stream.size() : cut, stream.size()});
    CHECK(r.frames == expected);
  }
}

TEST_CASE("syslog_framer refuses a frame over max_frame_size", "[framer]") {
  const framer_options small{.max_frame_size = 8};
  SECTION("an octet count says so before any body byte") {
    const auto r = frame("9 ", {1}, small);
    CHECK(r.error == framing_error::frame_too_large);
  }
  SECTION("exactly the maximum is fine, counted or newline-delimited") {
    CHECK(frame_whole("8 12345678", small).frames == std::vector<std::string>{"12345678"});
    CHECK(frame("<1234567\n", {1}, small).frames == std::vector<std::string>{"<1234567"});
  }
  SECTION("a line that reaches the limit without a line feed") {
    const auto r = frame("<123456789\n", {3}, small);
    CHECK(r.error == framing_error::frame_too_large);
    CHECK(r.frames.empty());
  }
  SECTION("frames before the bad one are handed on") {
    const auto r = frame_whole("3 abc<1>\n99 xx", small);
    CHECK(r.frames == std::vector<std::string>{"abc", "<1>"});
    CHECK(r.error == framing_error::frame_too_large);
  }
}

TEST_CASE("syslog_framer refuses a malformed octet count", "[framer]") {
  const framer_options counted{.mode = framing::octet_counting};
  CHECK(frame_whole("05 hello").error == framing_error::bad_octet_count);
  // Eleven digits exceed any allowed maximum: refused before the count is even complete.
  CHECK(frame_whole("12345678901 x", {.max_frame_size = std::size_t{1} << 30}).error ==
        framing_error::frame_too_large);
  CHECK(frame_whole("12x").error == framing_error::bad_octet_count);
  CHECK(frame_whole("<13>no count", counted).error == framing_error::bad_octet_count);
  CHECK(frame_whole(" 5 hello", counted).error == framing_error::bad_octet_count);
}

TEST_CASE("syslog_framer stays failed until reset", "[framer]") {
  pmrkit::buffer_pool pool;
  syslog_framer framer(pool, {.max_frame_size = 4});
  std::vector<std::string> frames;
  auto collect = [&](std::span<const std::byte> f) { frames.push_back(as_string(f)); };
  CHECK(framer.feed(as_bytes("10 "), collect) == framing_error::frame_too_large);
  CHECK(framer.feed(as_bytes("1 a"), collect) == framing_error::frame_too_large);
  CHECK(framer.error() == framing_error::frame_too_large);
  CHECK(frames.empty());
  framer.reset();
  CHECK(framer.feed(as_bytes("1 a"), collect) == framing_error::none);
  CHECK(frames == std::vector<std::string>{"a"});
}

TEST_CASE("syslog_framer in newline mode takes a leading digit as message text", "[framer]") {
  const auto r = frame_whole("12 is a number\n", {.mode = framing::newline});
  CHECK(r.frames == std::vector<std::string>{"12 is a number"});
}

TEST_CASE("syslog_framer reports a partial frame at the end of a stream", "[framer]") {
  pmrkit::buffer_pool pool;
  syslog_framer framer(pool);
  auto ignore = [](std::span<const std::byte>) {};
  CHECK_FALSE(framer.has_partial_frame());
  framer.feed(as_bytes("\n\n"), ignore);
  CHECK_FALSE(framer.has_partial_frame());
  framer.feed(as_bytes("1"), ignore);
  CHECK(framer.has_partial_frame());
  framer.feed(as_bytes("0 abc"), ignore);
  CHECK(framer.has_partial_frame());
  framer.feed(as_bytes("defghij"), ignore);
  CHECK_FALSE(framer.has_partial_frame());
  CHECK(framer.frames() == 1);
}

TEST_CASE("syslog_framer takes its assembly buffers from the pool and gives them back",
          "[framer]") {
  pmrkit::counting_resource counted;
  {
    pmrkit::buffer_pool pool(&counted);
    const std::string stream =
        "300 " + std::string(300, 'a') + "<13>" + std::string(500, 'b') + "\n";
    const auto r = frame(stream, {7}, {}, &pool);
    REQUIRE(r.frames.size() == 2);
    CHECK(r.frames[0] == std::string(300, 'a'));
    CHECK(r.frames[1] == "<13>" + std::string(500, 'b'));
    CHECK(counted.stats().allocations > 0);
    CHECK(counted.stats().bytes_in_use == pool.stats().bytes_retained);
  }
  CHECK(counted.stats().bytes_in_use == 0);
}

TEST_CASE("syslog_framer is left aborted when the frame handler throws", "[framer]") {
  pmrkit::buffer_pool pool;
  syslog_framer framer(pool);
  CHECK_THROWS_AS(framer.feed(as_bytes("1 a1 b"),
                              [](std::span<const std::byte>) { throw std::runtime_error("no"); }),
                  std::runtime_error);
  CHECK(framer.error() == framing_error::aborted);
  CHECK(framer.feed(as_bytes("1 c"), [](std::span<const std::byte>) {}) == framing_error::aborted);
}

TEST_CASE("syslog_framer rejects an impossible max_frame_size", "[framer]") {
  pmrkit::buffer_pool pool;
  CHECK_THROWS_AS(syslog_framer(pool, {.max_frame_size = 0}), invalid_option);
  CHECK_THROWS_WITH(syslog_framer(pool, {.max_frame_size = (std::size_t{1} << 30) + 1}),
                    Catch::Matchers::Contains("allowed: 1..1073741824"));
  CHECK(to_string(framing_error::frame_too_large).find("max_frame_size") != std::string_view::npos);
}

// A random mix of both framings, cut at random, must come out as it went in.
TEST_CASE("syslog_framer round-trips random streams cut at random", "[framer]") {
  std::mt19937 rng(20240607);
  for (int round = 0; round < 200; ++round) {
    std::vector<std::string> frames;
    std::string stream;
    const int count = std::uniform_int_distribution<int>(1, 20)(rng);
    for (int i = 0; i < count; ++i) {
      const bool counted = rng() % 2 == 0;
      std::string body = counted ? "" : "<";
      const int length = std::uniform_int_distribution<int>(counted ? 1 : 0, 300)(rng);
      for (int k = 0; k < length; ++k) {
        // Counted frames may hold any byte; newline ones anything but LF (and no final CR).
        char c = static_cast<char>(rng() % 256);
        if (!counted && (c == '\n' || c == '\r')) c = ' ';
        body += c;
      }
      frames.push_back(body);
      stream += counted ? std::to_string(body.size()) + " " + body : body + "\n";
      if (rng() % 4 == 0) stream += "\n";
    }
    std::vector<std::size_t> chunks;
    for (int k = 0; k < 8; ++k)
      chunks.push_back(std::uniform_int_distribution<std::size_t>(1, 64)(rng));
    const auto r = frame(stream, chunks, {.max_frame_size = 1024});
    REQUIRE(r.error == framing_error::none);
    REQUIRE(r.frames == frames);
  }
}

}  // namespace
