#include "pmrkit/protobuf/span_codec.hpp"

#include <catch2/catch.hpp>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <new>
#include <random>
#include <string>
#include <vector>

#include "global_heap.hpp"
#include "pmrkit/buffer_pool.hpp"
#include "pmrkit/counting_resource.hpp"
#include "shell_quote.hpp"
#include "test_resources.hpp"

// This program links support/global_heap.cpp, which counts operator new, so a test can show
// that a warm encoder allocates nothing at all (protobuf's own allocations go through it).

namespace {

using namespace pmrkit::protobuf;

span example_span(int metrics = 3) {
  span s;
  s.version = 1;
  s.trace_id = 42;
  s.id = 4242;
  s.parent_id = 7;
  s.start_timestamp = 1'700'000'000'000'000'000;
  s.end_timestamp = 1'700'000'000'123'456'789;
  s.error = true;
  s.service = "checkout-service";
  s.tags = {{"env", "production"}, {"region", "eu-west-1"}, {"host", "web-17.example.internal"}};
  s.indicator = true;
  for (int i = 0; i < metrics; ++i) {
    sample m;
    m.metric = static_cast<metric_type>(i % 5);
    m.name = "http.request.duration.milliseconds." + std::to_string(i);
    m.value = 12.5f * static_cast<float>(i + 1);
    m.timestamp = 1'700'000'000 + i;
    m.message = i == 0 ? "" : "slow backend";
    m.status = static_cast<sample_status>(i % 4);
    m.sample_rate = 0.5f;
    m.tags = {{"endpoint", "/api/v1/orders"}, {"code", std::to_string(200 + i)}};
    m.unit = "ms";
    s.metrics.push_back(m);
  }
  s.name = "POST /api/v1/orders";  // the last field on the wire (13)
  return s;
}

TEST_CASE("span_encoder and span_parser round-trip a span", "[protobuf]") {
  pmrkit::buffer_pool pool;
  span_encoder encoder(pool);
  span_parser parser(pool);
  for (int metrics : {0, 1, 5}) {
    const span original = example_span(metrics);
    const pmrkit::byte_buffer bytes = encoder.encode(original);
    CHECK(bytes.pool() == &pool);
    const auto parsed = parser.parse_copy(bytes.span());
    REQUIRE(parsed.has_value());
    CHECK(*parsed == original);
  }
  CHECK(parser.stats().parsed == 3);
  CHECK(parser.stats().parse_errors == 0);
}

TEST_CASE("serialize() writes the same span the encoder does, on the given resource",
          "[protobuf]") {
  pmrkit::counting_resource counted;
  const span original = example_span();
  {
    const pmrkit::byte_buffer bytes = serialize(original, &counted);
    CHECK(bytes.resource() == &counted);
    CHECK(bytes.pool() == nullptr);
    // The arena block and the output buffer both came from the resource.
    CHECK(counted.stats().allocations >= 2);
    pmrkit::buffer_pool pool;
    span_parser parser(pool);
    const auto parsed = parser.parse_copy(bytes.span());
    REQUIRE(parsed.has_value());
    CHECK(*parsed == original);
  }
  CHECK(counted.stats().bytes_in_use == 0);
}

TEST_CASE("a warm span_encoder allocates nothing for spans of the same shape", "[protobuf]") {
  pmrkit::counting_resource counted;
  pmrkit::buffer_pool pool(&counted);
  span_encoder encoder(pool);
  span s = example_span();
  (void)encoder.encode(s);  // warm: the message's strings, map nodes and samples exist now
  const auto resource_before = counted.stats().allocations;
  const auto heap_before = pmrkit::test::global_heap::allocations();
  for (int i = 0; i < 100; ++i) {
    s.id = i;
    s.metrics[1].value = static_cast<float>(i);
    s.tags["region"] = i % 2 ? "eu-west-1" : "us-east-2";  // same key, other value: no node
    const pmrkit::byte_buffer bytes = encoder.encode(s);
    CHECK(!bytes.empty());
  }
  CHECK(pmrkit::test::global_heap::allocations() == heap_before);
  CHECK(counted.stats().allocations == resource_before);
}

TEST_CASE("span_encoder follows spans whose shape changes", "[protobuf]") {
  pmrkit::buffer_pool pool;
  span_encoder encoder(pool);
  span_parser parser(pool);
  std::mt19937 rng(99);
  for (int round = 0; round < 50; ++round) {
    span s = example_span(static_cast<int>(rng() % 6));
    // Drop, add and change tags at random, so stale keys must be removed.
    if (rng() % 2) s.tags.erase("env");
    // insert_or_assign, not tags[...] = "x": GCC 12 takes the inlined assignment of a literal
    // for an overlapping copy here (-Wrestrict, an error in CI).
    if (rng() % 2) s.tags.insert_or_assign("extra" + std::to_string(rng() % 3), std::string("x"));
    for (auto& m : s.metrics) {
      if (rng() % 2) m.tags.clear();
      if (rng() % 3 == 0) m.name.clear();
    }
    pmrkit::byte_buffer out = pool.acquire(16);
    out.append("prefix", 6);
    const std::size_t written = encoder.encode_into(s, out);
    REQUIRE(out.size() == 6 + written);
    const auto parsed = parser.parse_copy(out.span().subspan(6));
    REQUIRE(parsed.has_value());
    REQUIRE(*parsed == s);
  }
}

TEST_CASE("span_encoder::encode_to writes into caller memory, or refuses", "[protobuf]") {
  pmrkit::buffer_pool pool;
  span_encoder encoder(pool);
  span_parser parser(pool);
  const span original = example_span();
  std::vector<std::byte> storage(4096, std::byte{0x5a});
  const std::size_t size = encoder.encode_to(original, storage);
  REQUIRE(size > 0);
  CHECK(parser.parse_copy(std::span(storage).first(size)) == std::optional<span>(original));
  CHECK(storage[size] == std::byte{0x5a});
  std::vector<std::byte> small(size - 1, std::byte{0x5a});
  CHECK_THROWS_AS(encoder.encode_to(original, small), std::length_error);
  CHECK(std::all_of(small.begin(), small.end(), [](std::byte b) { return b == std::byte{0x5a}; }));
}

TEST_CASE("a span with text that is not UTF-8 is refused, not sent to be refused",
          "[protobuf]") {
  // libprotobuf serializes any bytes into a proto3 string, and every parser (ours too) then
  // refuses the message: such a span was "sent" and never received.
  pmrkit::buffer_pool pool;
  span_encoder encoder(pool);
  span_parser parser(pool);
  const auto refused = [&](auto spoil, const char* field) {
    span s = example_span();
    spoil(s);
    INFO(field);
    CHECK_THROWS_WITH(encoder.encode(s),
                      Catch::Contains(field) && Catch::Contains("is not valid UTF-8"));
    CHECK_THROWS_AS(serialize(s, std::pmr::new_delete_resource()), std::invalid_argument);
  };
  refused([](span& s) { s.name = "caf\xe9"; }, "name");
  refused([](span& s) { s.service = "\xc0\xaf"; }, "service");  // an overlong "/"
  refused([](span& s) { s.tags["k"] = "\xed\xa0\x80"; }, "tags");  // a surrogate
  refused([](span& s) { s.metrics.at(0).unit = "\xff"; }, "metric unit");
  refused([](span& s) { s.metrics.at(0).tags["\x80"] = "v"; }, "metric tags");
  // Text in UTF-8 goes through and comes back.
  span fine = example_span();
  fine.name = "caf\xc3\xa9 \xe2\x82\xac";
  const pmrkit::byte_buffer bytes = encoder.encode(fine);
  CHECK(parser.parse_copy(bytes.span()) == std::optional<span>(fine));
}

TEST_CASE("span_view reads the parsed span in place", "[protobuf]") {
  pmrkit::buffer_pool pool;
  span_encoder encoder(pool);
  span_parser parser(pool);
  const span original = example_span(2);
  bool called = false;
  CHECK(parser.parse(encoder.encode(original).span(), [&](const span_view& v) {
    called = true;
    CHECK(v.version() == 1);
    CHECK(v.trace_id() == 42);
    CHECK(v.id() == 4242);
    CHECK(v.parent_id() == 7);
    CHECK(v.start_timestamp() == original.start_timestamp);
    CHECK(v.end_timestamp() == original.end_timestamp);
    CHECK(v.error());
    CHECK(v.indicator());
    CHECK(v.service() == "checkout-service");
    CHECK(v.name() == "POST /api/v1/orders");
    CHECK(v.tag_count() == 3);
    CHECK(v.tag("region") == std::optional<std::string_view>("eu-west-1"));
    CHECK_FALSE(v.tag("missing").has_value());
    std::map<std::string, std::string> tags;
    v.for_each_tag([&](std::string_view k, std::string_view val) { tags.emplace(k, val); });
    CHECK(tags == original.tags);
    REQUIRE(v.metric_count() == 2);
    const sample_view m = v.metric(1);
    CHECK(m.metric() == metric_type::gauge);
    CHECK(m.name() == "http.request.duration.milliseconds.1");
    CHECK(m.value() == 25.0f);
    CHECK(m.status() == sample_status::warning);
    CHECK(m.sample_rate() == 0.5f);
    CHECK(m.unit() == "ms");
    CHECK(m.message() == "slow backend");
    CHECK(m.tag("code") == std::optional<std::string_view>("201"));
    CHECK(m.tag_count() == 2);
    CHECK_THROWS_AS(v.metric(2), std::out_of_range);
  }));
  CHECK(called);
}

std::string scratch(const std::string& name) {
  return (std::filesystem::temp_directory_path() /
          ("pmrkit-protobuf-" + std::to_string(::getpid()) + "-" + name))
      .string();
}

TEST_CASE("protoc decodes the encoder's bytes with the installed schema", "[protobuf][protoc]") {
  pmrkit::buffer_pool pool;
  span_encoder encoder(pool);
  const pmrkit::byte_buffer bytes = encoder.encode(example_span(2));
  const std::string input = scratch("span.bin");
  const std::string output = scratch("span.txt");
  {
    std::ofstream out(input, std::ios::binary);
    out.write(reinterpret_cast<const char*>(bytes.data()),
              static_cast<std::streamsize>(bytes.size()));
  }
  const std::string command = pmrkit::test::shell_quoted(PMRKIT_PROTOC) + " --decode=pmrkit.ssf.SSFSpan -I " +
                              pmrkit::test::shell_quoted(PMRKIT_SSF_PROTO_DIR) + " pmrkit/ssf/span.proto < " +
                              pmrkit::test::shell_quoted(input) + " > " + pmrkit::test::shell_quoted(output) + " 2>&1";
  const int status = std::system(command.c_str());
  std::ifstream in(output);
  const std::string text((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  std::remove(input.c_str());
  std::remove(output.c_str());
  INFO(command << "\n" << text);
  REQUIRE(status == 0);
  CHECK_THAT(text, Catch::Matchers::Contains("version: 1\n"));
  CHECK_THAT(text, Catch::Matchers::Contains("trace_id: 42\n"));
  CHECK_THAT(text, Catch::Matchers::Contains("id: 4242\n"));
  CHECK_THAT(text, Catch::Matchers::Contains("error: true\n"));
  CHECK_THAT(text, Catch::Matchers::Contains("service: \"checkout-service\"\n"));
  CHECK_THAT(text, Catch::Matchers::Contains("name: \"POST /api/v1/orders\"\n"));
  CHECK_THAT(text, Catch::Matchers::Contains("indicator: true\n"));
  CHECK_THAT(text, Catch::Matchers::Contains("key: \"region\"\n  value: \"eu-west-1\"\n"));
  CHECK_THAT(text, Catch::Matchers::Contains("metric: GAUGE\n"));
  CHECK_THAT(text, Catch::Matchers::Contains("name: \"http.request.duration.milliseconds.1\"\n"));
  CHECK_THAT(text, Catch::Matchers::Contains("status: WARNING\n"));
  CHECK_THAT(text, Catch::Matchers::Contains("unit: \"ms\"\n"));
  CHECK_THAT(text, Catch::Matchers::Contains("sample_rate: 0.5\n"));
}

TEST_CASE("span_parser counts garbage and truncated datagrams and goes on", "[protobuf]") {
  pmrkit::buffer_pool pool;
  span_encoder encoder(pool);
  span_parser parser(pool);
  auto never = [](const span_view&) { FAIL("a bad datagram reached the callback"); };
  const std::vector<std::vector<unsigned char>> garbage{
      {0xff, 0xff, 0xff, 0xff},              // field 0 / bad wire type
      {0x42, 0x05, 'a', 'b'},                // service: length 5, 2 bytes present
      {0x10, 0x80, 0x80, 0x80},              // trace_id: varint never ends
      {0x52, 0x02, 0x0a, 0x09},              // metrics: a sample whose name overruns it
  };
  for (const auto& g : garbage) {
    CHECK_FALSE(parser.parse({reinterpret_cast<const std::byte*>(g.data()), g.size()}, never));
  }
  const pmrkit::byte_buffer bytes = encoder.encode(example_span());
  // The last field is the span's name, a string: cutting its last byte leaves it short.
  CHECK_FALSE(parser.parse(bytes.span().first(bytes.size() - 1), never));
  CHECK(parser.stats().parse_errors == garbage.size() + 1);
  CHECK(parser.stats().parsed == 0);
  // Random garbage never crashes it; and a good span still parses afterwards.
  std::mt19937 rng(7);
  for (int i = 0; i < 500; ++i) {
    std::vector<std::byte> noise(rng() % 200);
    for (auto& b : noise) b = static_cast<std::byte>(rng());
    (void)parser.parse(noise, [](const span_view& v) { (void)v.to_span(); });
  }
  CHECK(parser.parse(bytes.span(), [](const span_view&) {}));
  // An empty datagram is a valid proto3 message: the span with every field at its default.
  CHECK(parser.parse_copy({}) == std::optional<span>(span{}));
}

TEST_CASE("span_parser drops a newer sender's fields before libprotobuf puts them on the heap",
          "[protobuf]") {
  pmrkit::buffer_pool pool;
  span_encoder encoder(pool);
  span_parser parser(pool);
  const pmrkit::byte_buffer encoded = encoder.encode(example_span(2));
  std::vector<std::byte> wire(encoded.data(), encoded.data() + encoded.size());
  // SSF's old "operation" (field 9, reserved in this schema), and a sample (field 10) whose
  // one field has a number SSFSample does not have (15).
  for (const int b : {0x4a, 0x02, int{'o'}, int{'p'}, 0x52, 0x02, 0x78, 0x01}) {
    wire.push_back(static_cast<std::byte>(b));
  }
  span expected = example_span(2);
  expected.metrics.emplace_back().sample_rate = 0;  // the sample whose one field was unknown
  for (int i = 0; i < 3; ++i) REQUIRE(parser.parse_copy(wire) == std::optional<span>(expected));
  const auto heap_allocations_of_100 = [&](std::span<const std::byte> datagram) {
    const auto before = pmrkit::test::global_heap::allocations();
    for (int i = 0; i < 100; ++i) CHECK(parser.parse(datagram, [](const span_view&) {}));
    return pmrkit::test::global_heap::allocations() - before;
  };
  // libprotobuf puts strings longer than 15 bytes on the heap, arena or not, for both; it
  // kept the unknown fields in a set of their own as well, two allocations more a parse.
  CHECK(heap_allocations_of_100(wire) == heap_allocations_of_100(encoded.span()));
  CHECK(parser.stats().with_unknown_fields == 103);  // a span without any is parsed as it is
  CHECK(parser.stats().parsed == 203);
}

TEST_CASE("span_parser's arena memory comes from the pool's resource and goes back",
          "[protobuf]") {
  pmrkit::counting_resource counted;
  {
    pmrkit::buffer_pool pool(&counted);
    span_encoder encoder(pool);
    const pmrkit::byte_buffer small = encoder.encode(example_span(1));
    span_parser parser(pool, {.initial_arena_block = 16 * 1024});
    const auto before = counted.stats();
    CHECK(parser.parse(small.span(), [&](const span_view&) {
      // The arena's block is out of the pool right now, allocated from `counted`.
      CHECK(counted.stats().bytes_allocated - before.bytes_allocated >= 16 * 1024);
      CHECK(counted.stats().bytes_in_use >= before.bytes_in_use + 16 * 1024);
    }));
    CHECK(parser.stats().arena_overflows == 0);
    // Back in the pool: a second parse takes the same block, nothing new is allocated.
    const auto after_first = counted.stats().allocations;
    CHECK(parser.parse(small.span(), [](const span_view&) {}));
    CHECK(counted.stats().allocations == after_first);

    // A span too big for the block overflows once; the parser then takes a bigger block.
    const pmrkit::byte_buffer big = encoder.encode(example_span(300));
    CHECK(parser.parse(big.span(), [](const span_view&) {}));
    CHECK(parser.stats().arena_overflows == 1);
    CHECK(parser.stats().arena_block > 16 * 1024);
    CHECK(parser.parse(big.span(), [](const span_view&) {}));
    CHECK(parser.stats().arena_overflows == 1);
  }
  CHECK(counted.stats().bytes_in_use == 0);
}

TEST_CASE("one huge span does not make every later parse allocate", "[protobuf]") {
  // 32,753 empty metrics in one datagram take megabytes of arena: the block the parser learns
  // must stay one its pool keeps, and shrink again once spans are small.
  pmrkit::counting_resource counted;
  {
    pmrkit::buffer_pool pool(&counted, {.max_capacity = 1 << 20});
    span_encoder encoder(pool);
    const pmrkit::byte_buffer small = encoder.encode(example_span(1));
    std::vector<std::byte> hostile;
    for (int i = 0; i < 32'753; ++i) hostile.insert(hostile.end(), {std::byte{0x52}, std::byte{0}});
    span_parser parser(pool, {.initial_arena_block = 16 * 1024});
    CHECK(parser.parse(hostile, [](const span_view&) {}));
    CHECK(parser.stats().arena_overflows == 1);
    CHECK(parser.stats().arena_block == std::size_t{1} << 20);  // the pool's max_capacity
    CHECK(parser.parse(small.span(), [](const span_view&) {}));
    const auto warm = counted.stats().allocations;
    for (int i = 0; i < 100; ++i) CHECK(parser.parse(small.span(), [](const span_view&) {}));
    CHECK(counted.stats().allocations == warm);  // the learned block comes from the pool
    CHECK(pool.stats().dropped_for_size == 0);

    // 1,024 small spans in a row halve it; enough of them bring it back to the first size.
    for (int i = 0; i < 1024 - 101; ++i) parser.parse(small.span(), [](const span_view&) {});
    CHECK(parser.stats().arena_block == std::size_t{1} << 19);
    for (int i = 0; i < 6 * 1024; ++i) parser.parse(small.span(), [](const span_view&) {});
    CHECK(parser.stats().arena_block == 16 * 1024);
  }
  CHECK(counted.stats().bytes_in_use == 0);
}

TEST_CASE("span_parser releases its arena when the callback throws", "[protobuf]") {
  pmrkit::counting_resource counted;
  {
    pmrkit::buffer_pool pool(&counted);
    span_encoder encoder(pool);
    span_parser parser(pool);
    const pmrkit::byte_buffer bytes = encoder.encode(example_span());
    CHECK_THROWS_AS(
        parser.parse(bytes.span(), [](const span_view&) { throw std::runtime_error("x"); }),
        std::runtime_error);
    CHECK(counted.stats().bytes_in_use == pool.stats().bytes_retained + bytes.capacity());
  }
  CHECK(counted.stats().bytes_in_use == 0);
}

TEST_CASE("span_parser and the encoder pass on a failing resource's error, leaking nothing",
          "[protobuf]") {
  pmrkit::counting_resource counted;
  pmrkit::test::failing_resource failing(&counted, 0);
  {
    pmrkit::buffer_pool pool(&failing);
    span_encoder encoder(pool);
    span_parser parser(pool);
    CHECK_THROWS_AS(encoder.encode(example_span()), std::bad_alloc);
    CHECK_THROWS_AS(serialize(example_span(), &failing), std::bad_alloc);
    failing.allow_all();
    const pmrkit::byte_buffer bytes = encoder.encode(example_span());
    failing.allow(0);
    pool.trim();
    CHECK_THROWS_AS(parser.parse(bytes.span(), [](const span_view&) {}), std::bad_alloc);
    failing.allow_all();
  }
  CHECK(counted.stats().bytes_in_use == 0);
}

TEST_CASE("span_parser counts a parse that the heap fails", "[protobuf]") {
  // libprotobuf takes strings over 15 bytes ("checkout-service") from the heap, not the arena.
  pmrkit::buffer_pool pool;
  span_encoder encoder(pool);
  span_parser parser(pool);
  const pmrkit::byte_buffer bytes = encoder.encode(example_span());
  REQUIRE(parser.parse(bytes.span(), [](const span_view&) {}));
  pmrkit::test::global_heap::fail_at(1);
  CHECK_THROWS_AS(parser.parse(bytes.span(), [](const span_view&) {}), std::bad_alloc);
  CHECK(pmrkit::test::global_heap::fired());
  pmrkit::test::global_heap::disarm();
  const span_parser_stats s = parser.stats();
  CHECK(s.parsed + s.parse_errors + s.allocation_failures == 2);
  CHECK(s.allocation_failures == 1);
}

TEST_CASE("span_parser rejects impossible arena sizes", "[protobuf]") {
  pmrkit::buffer_pool pool;
  CHECK_THROWS_AS(span_parser(pool, {.initial_arena_block = 10}), std::invalid_argument);
  CHECK_THROWS_WITH(span_parser(pool, {.initial_arena_block = 8192, .max_arena_block = 4096}),
                    Catch::Matchers::Contains("allowed: 1024..4096"));
}

}  // namespace
