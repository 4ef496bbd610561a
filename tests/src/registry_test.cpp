#include <catch2/catch.hpp>
#include <set>
#include <stdexcept>
#include <string>

#include "pmrkit/registry.hpp"
#include "spec.hpp"

using Catch::Matchers::Contains;

TEST_CASE("strategies() lists each strategy once, with a summary", "[registry]") {
  const auto all = pmrkit::strategies();
  std::set<std::string> names;
  for (const auto& s : all) {
    CHECK_FALSE(s.summary.empty());
    CHECK(names.insert(s.name).second);
  }
  for (const char* required : {"new_delete", "std_sync_pool", "std_unsync_pool", "monotonic",
                               "boost_pool", "mimalloc", "mimalloc_heap"})
    CHECK(names.count(required) == 1);
}

TEST_CASE("an unknown strategy name lists every valid name", "[registry]") {
  try {
    (void)pmrkit::make_resource("jemalloc");
    FAIL("expected std::invalid_argument");
  } catch (const std::invalid_argument& e) {
    const std::string message = e.what();
    CHECK_THAT(message, Contains("jemalloc"));
    for (const auto& s : pmrkit::strategies()) CHECK_THAT(message, Contains(s.name));
  }
}

TEST_CASE("option errors name the key and what is allowed", "[registry]") {
  SECTION("unknown key") {
    REQUIRE_THROWS_WITH(pmrkit::make_resource("std_sync_pool:max_blocks=4"),
                        Contains("max_blocks") && Contains("max_blocks_per_chunk") &&
                            Contains("largest_required_pool_block"));
  }
  SECTION("a strategy without options") {
    REQUIRE_THROWS_WITH(pmrkit::make_resource("new_delete:size=1"),
                        Contains("size") && Contains("takes no options"));
  }
  SECTION("malformed value") {
    REQUIRE_THROWS_WITH(pmrkit::make_resource("monotonic:initial_size=lots"),
                        Contains("initial_size=lots") && Contains("K, M or G"));
  }
  SECTION("out of range") {
    REQUIRE_THROWS_WITH(pmrkit::make_resource("boost_pool:max_pooled=2M"),
                        Contains("max_pooled=2M") && Contains("1M"));
  }
  SECTION("not a power of two") {
    REQUIRE_THROWS_WITH(pmrkit::make_resource("boost_pool:max_pooled=3000"),
                        Contains("max_pooled") && Contains("power of two"));
  }
  SECTION("malformed spec") {
    REQUIRE_THROWS_AS(pmrkit::make_resource(""), std::invalid_argument);
    REQUIRE_THROWS_AS(pmrkit::make_resource(":a=1"), std::invalid_argument);
    REQUIRE_THROWS_WITH(pmrkit::make_resource("monotonic:initial_size"),
                        Contains("key=value"));
    REQUIRE_THROWS_WITH(pmrkit::make_resource("monotonic:initial_size=1K,initial_size=2K"),
                        Contains("twice"));
    REQUIRE_THROWS_AS(pmrkit::make_resource("monotonic:initial_size=1K,"),
                      std::invalid_argument);
  }
  SECTION("null upstream") {
    REQUIRE_THROWS_WITH(pmrkit::make_resource("monotonic", nullptr), Contains("null upstream"));
  }
}

TEST_CASE("specs accept options, spaces and size suffixes", "[registry]") {
  CHECK(pmrkit::make_resource(" monotonic : initial_size = 64K ") != nullptr);
  CHECK(pmrkit::make_resource("std_unsync_pool:max_blocks_per_chunk=16,"
                              "largest_required_pool_block=1M") != nullptr);
  const auto parsed = pmrkit::detail::parse_spec("boost_pool:max_pooled=4K,chunk_size=1M");
  CHECK(parsed.name == "boost_pool");
  REQUIRE(parsed.options.size() == 2);
  CHECK(parsed.options[1].first == "chunk_size");
}

TEST_CASE("parse_size understands K, M and G and rejects the rest", "[registry]") {
  std::size_t n = 0;
  CHECK((pmrkit::detail::parse_size("123", n) && n == 123));
  CHECK((pmrkit::detail::parse_size("64K", n) && n == 65536));
  CHECK((pmrkit::detail::parse_size("64k", n) && n == 65536));
  CHECK((pmrkit::detail::parse_size("2M", n) && n == (2u << 20)));
  CHECK((pmrkit::detail::parse_size("1G", n) && n == (1u << 30)));
  CHECK((pmrkit::detail::parse_size("4KiB", n) && n == 4096));
  CHECK_FALSE(pmrkit::detail::parse_size("", n));
  CHECK_FALSE(pmrkit::detail::parse_size("K", n));
  CHECK_FALSE(pmrkit::detail::parse_size("12X", n));
  CHECK_FALSE(pmrkit::detail::parse_size("-1", n));
  CHECK_FALSE(pmrkit::detail::parse_size("99999999999999999999", n));
  CHECK_FALSE(pmrkit::detail::parse_size("99999999999999G", n));
}
