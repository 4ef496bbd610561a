// The registry: names, specs and option errors, the public description of each strategy, and
// the documents generated from or checked against it (docs/strategies.md, the fuzz dictionary).
#include <algorithm>
#include <catch2/catch.hpp>
#include <fstream>
#include <iostream>
#include <limits>
#include <new>
#include <set>
#include <stdexcept>
#include <string>
#include <vector>

#include "pmrkit/registry.hpp"
#include "spec.hpp"
#include "test_resources.hpp"

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
  // The name is looked up first: a misspelt name with a malformed option list is reported as
  // the misspelling, which is what the user needs to hear of.
  REQUIRE_THROWS_WITH(pmrkit::make_resource("sizeclass:max_pooled"),
                      Contains("unknown strategy 'sizeclass'") && Contains("size_class"));
  REQUIRE_THROWS_WITH(pmrkit::describe_strategy("nope:x"), Contains("unknown strategy 'nope'"));
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
    // Well formed, so no hint about how to write a size.
    REQUIRE_THROWS_WITH(pmrkit::make_resource("boost_pool:max_pooled=2M"),
                        !Contains("K, M or G"));
    // Past SIZE_MAX is out of range too, not malformed.
    REQUIRE_THROWS_WITH(pmrkit::make_resource("size_class:max_retained=18446744073709551616"),
                        Contains("max_retained=18446744073709551616 is invalid") &&
                            Contains("allowed: a size from 0 to") && !Contains("K, M or G"));
    REQUIRE_THROWS_WITH(pmrkit::make_resource("size_class:max_retained=99999999999999999999G"),
                        !Contains("K, M or G"));
  }
  SECTION("options that constrain each other") {
    REQUIRE_THROWS_WITH(pmrkit::make_resource("boost_pool:chunk_size=1M,max_chunk_size=128K"),
                        Contains("max_chunk_size=128K") && Contains("at least chunk_size (1M)"));
  }
  SECTION("not a power of two") {
    REQUIRE_THROWS_WITH(pmrkit::make_resource("boost_pool:max_pooled=3000"),
                        Contains("max_pooled") && Contains("power of two") &&
                            !Contains("K, M or G"));
  }
  SECTION("malformed spec") {
    REQUIRE_THROWS_AS(pmrkit::make_resource(""), std::invalid_argument);
    REQUIRE_THROWS_AS(pmrkit::make_resource(":a=1"), std::invalid_argument);
    REQUIRE_THROWS_WITH(pmrkit::make_resource("monotonic:initial_size"),
                        Contains("key=value"));
    REQUIRE_THROWS_WITH(pmrkit::make_resource("monotonic:initial_size=1K,initial_size=2K"),
                        Contains("twice"));
    REQUIRE_THROWS_WITH(pmrkit::make_resource("monotonic:initial_size=1K,"),
                        Contains("empty option") && Contains("stray ','"));
    REQUIRE_THROWS_WITH(pmrkit::make_resource("monotonic:"), Contains("empty option"));
    REQUIRE_THROWS_WITH(pmrkit::describe_strategy("monotonic:a=1,,b=2"),
                        Contains("empty option"));
  }
  SECTION("null upstream") {
    REQUIRE_THROWS_WITH(pmrkit::make_resource("monotonic", nullptr), Contains("null upstream"));
  }
}

TEST_CASE("specs accept options, spaces and size suffixes", "[registry]") {
  CHECK(pmrkit::make_resource(" monotonic : initial_size = 64K ") != nullptr);
  // A spec read from a file, or an environment variable set from one, may end in a line break.
  CHECK(pmrkit::make_resource("size_class\r\n") != nullptr);
  CHECK(pmrkit::make_resource("\tmonotonic:initial_size=64K\n") != nullptr);
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
  // The unit's tail in any case, as people type it.
  CHECK((pmrkit::detail::parse_size("64kib", n) && n == 65536));
  CHECK((pmrkit::detail::parse_size("64KB", n) && n == 65536));
  CHECK((pmrkit::detail::parse_size("8mb", n) && n == (8u << 20)));
  CHECK((pmrkit::detail::parse_size("1GIB", n) && n == (1u << 30)));
  CHECK_FALSE(pmrkit::detail::parse_size("64KiBs", n));
  CHECK_FALSE(pmrkit::detail::parse_size("64kbi", n));
  CHECK_FALSE(pmrkit::detail::parse_size("64bk", n));
  CHECK_FALSE(pmrkit::detail::parse_size("", n));
  CHECK_FALSE(pmrkit::detail::parse_size("K", n));
  CHECK_FALSE(pmrkit::detail::parse_size("12X", n));
  CHECK_FALSE(pmrkit::detail::parse_size("-1", n));
  CHECK_FALSE(pmrkit::detail::parse_size("99999999999999999999", n));
  CHECK_FALSE(pmrkit::detail::parse_size("99999999999999G", n));
  // Which of the two a refusal was: written as a size but too large, or not a size at all.
  using pmrkit::detail::size_text;
  CHECK(pmrkit::detail::read_size("18446744073709551615", n) == size_text::size);
  CHECK(pmrkit::detail::read_size("18446744073709551616", n) == size_text::too_large);
  CHECK(pmrkit::detail::read_size("99999999999999999999K", n) == size_text::too_large);
  CHECK(pmrkit::detail::read_size("17179869184G", n) == size_text::too_large);
  CHECK(pmrkit::detail::read_size("99999999999999999999X", n) == size_text::malformed);
  CHECK(pmrkit::detail::read_size("12X", n) == size_text::malformed);
}

// ---------------------------------------------------------------------------------------------
// Capabilities and options: public, and the one description docs and fuzzing are checked against

namespace {

const pmrkit::strategy_info& find_info(const std::vector<pmrkit::strategy_info>& all,
                                       std::string_view name) {
  for (const auto& s : all)
    if (s.name == name) return s;
  FAIL("no strategy " << name);
  throw std::logic_error("unreachable");
}

std::vector<std::string> lines_of(const std::string& path) {
  std::ifstream in(path);
  INFO(path);
  REQUIRE(in.good());
  std::vector<std::string> lines;
  for (std::string line; std::getline(in, line);) lines.push_back(line);
  return lines;
}

std::string trimmed(std::string_view s) {
  while (!s.empty() && s.front() == ' ') s.remove_prefix(1);
  while (!s.empty() && s.back() == ' ') s.remove_suffix(1);
  return std::string(s);
}

// "| a | b |" -> {"a", "b"}
std::vector<std::string> cells_of(const std::string& row) {
  std::vector<std::string> cells;
  std::string_view rest(row);
  rest.remove_prefix(1);
  for (auto bar = rest.find('|'); bar != std::string_view::npos; bar = rest.find('|')) {
    cells.push_back(trimmed(rest.substr(0, bar)));
    rest.remove_prefix(bar + 1);
  }
  return cells;
}

// "`a`, `b`" -> {"a", "b"}
std::vector<std::string> code_spans(const std::string& cell) {
  std::vector<std::string> spans;
  for (auto open = cell.find('`'); open != std::string::npos; open = cell.find('`', open)) {
    const auto close = cell.find('`', open + 1);
    if (close == std::string::npos) break;
    spans.push_back(cell.substr(open + 1, close - open - 1));
    open = close + 1;
  }
  return spans;
}

// The rows of the markdown tables under `heading`, without header and separator rows.
std::vector<std::vector<std::string>> table_rows(const std::vector<std::string>& lines,
                                                 const std::string& heading) {
  std::vector<std::vector<std::string>> rows;
  bool inside = false;
  bool header_seen = false;
  for (const auto& line : lines) {
    if (line.rfind("## ", 0) == 0) inside = line == heading;
    if (!inside || line.rfind("|", 0) != 0) {
      header_seen = false;
      continue;
    }
    if (!header_seen) {
      header_seen = true;  // the table's header row
      continue;
    }
    if (line.rfind("|---", 0) == 0) continue;
    rows.push_back(cells_of(line));
  }
  return rows;
}

std::string allowed_text(const pmrkit::option_info& o) {
  using pmrkit::detail::format_size;
  switch (o.kind) {
    case pmrkit::option_kind::size:
      return format_size(o.min) + " to " + format_size(o.max);
    case pmrkit::option_kind::power_of_two:
      return "power of two, " + format_size(o.min) + " to " + format_size(o.max);
    case pmrkit::option_kind::choice:
      break;
  }
  std::string list;
  for (const auto& a : o.allowed) list += (list.empty() ? "`" : ", `") + a + "`";
  return list;
}

// docs/strategies.md's option table as the registry says it should read: one row per option,
// strategies sharing an option (same name, default, range and meaning) on one row.
std::vector<std::vector<std::string>> expected_option_rows(
    const std::vector<pmrkit::strategy_info>& all) {
  std::vector<std::vector<std::string>> rows;
  std::vector<std::string> row_key;  // option identity per row, to merge strategies
  for (const auto& s : all) {
    for (const auto& o : s.options) {
      const std::string key = o.name + "|" + o.default_value + "|" + allowed_text(o) + "|" +
                              o.description;
      const auto found = std::find(row_key.begin(), row_key.end(), key);
      if (found != row_key.end()) {
        rows[static_cast<std::size_t>(found - row_key.begin())][0] += ", `" + s.name + "`";
        continue;
      }
      row_key.push_back(key);
      rows.push_back({"`" + s.name + "`", "`" + o.name + "`", "`" + o.default_value + "`",
                      allowed_text(o), o.description});
    }
  }
  return rows;
}

std::string as_markdown(const std::vector<std::vector<std::string>>& rows) {
  std::string text = "| strategy | option | default | allowed | meaning |\n|---|---|---|---|---|\n";
  for (const auto& row : rows) {
    for (const auto& cell : row) text += "| " + cell + " ";
    text += "|\n";
  }
  return text;
}

const std::string source_dir = PMRKIT_SOURCE_DIR;

}  // namespace

TEST_CASE("describe_strategy gives a strategy's capabilities and options", "[registry]") {
  const auto info = pmrkit::describe_strategy("size_class:max_pooled=4K");
  CHECK(info.name == "size_class");
  CHECK(info.thread_safe);
  CHECK(info.uses_upstream);
  CHECK(info.reuses_memory);
  const auto monotonic = pmrkit::describe_strategy("monotonic");
  CHECK_FALSE(monotonic.reuses_memory);
  CHECK_FALSE(pmrkit::describe_strategy("new_delete").uses_upstream);
  REQUIRE(info.options.size() == 8);
  CHECK(info.options[0].name == "max_pooled");
  CHECK(info.options[0].kind == pmrkit::option_kind::power_of_two);
  CHECK(info.options[0].default_value == "64K");
  CHECK(info.options[0].max == (std::size_t{1} << 20));
  const auto checked = pmrkit::describe_strategy("checked");
  CHECK(checked.options[0].allowed == std::vector<std::string>{"abort", "throw", "log"});
  REQUIRE_THROWS_WITH(pmrkit::describe_strategy("jemalloc"),
                      Contains("jemalloc") && Contains("size_class"));
}

TEST_CASE("every option accepts its default, range ends and allowed values, and nothing "
          "outside",
          "[registry]") {
  pmrkit::test::failing_resource refusing(std::pmr::new_delete_resource(), 0);
  // Accepted: make_resource may still fail with bad_alloc (the upstream refuses everything, so
  // that huge sizes cost nothing), but never with invalid_argument.
  const auto accepted = [&](const std::string& spec) {
    CAPTURE(spec);
    try {
      (void)pmrkit::make_resource(spec, &refusing);
    } catch (const std::bad_alloc&) {
    }
  };
  for (const auto& s : pmrkit::strategies()) {
    // Options may constrain each other (boost_pool: max_chunk_size >= chunk_size); a range's
    // lower end is accepted with every other size option at its own lower end.
    std::string others_at_min;
    for (const auto& o : s.options)
      if (o.kind != pmrkit::option_kind::choice)
        others_at_min += "," + o.name + "=" + std::to_string(o.min);
    for (const auto& o : s.options) {
      const std::string prefix = s.name + ":" + o.name + "=";
      CAPTURE(prefix);
      REQUIRE_NOTHROW(accepted(prefix + o.default_value));
      if (o.kind == pmrkit::option_kind::choice) {
        CHECK(std::count(o.allowed.begin(), o.allowed.end(), o.default_value) == 1);
        for (const auto& a : o.allowed) REQUIRE_NOTHROW(accepted(prefix + a));
        CHECK_THROWS_AS(accepted(prefix + "bogus"), std::invalid_argument);
        continue;
      }
      std::size_t fallback = 0;
      REQUIRE(pmrkit::detail::parse_size(o.default_value, fallback));
      CHECK((o.min <= fallback && fallback <= o.max));
      REQUIRE_NOTHROW(accepted(s.name + ":" + others_at_min.substr(1)));
      REQUIRE_NOTHROW(accepted(prefix + std::to_string(o.max)));
      if (o.min > 0)
        CHECK_THROWS_AS(accepted(prefix + std::to_string(o.min - 1)), std::invalid_argument);
      if (o.max < std::numeric_limits<std::size_t>::max())
        CHECK_THROWS_AS(accepted(prefix + std::to_string(o.max + 1)), std::invalid_argument);
    }
  }
}

TEST_CASE("no test-only strategy is in the library's registry", "[registry]") {
  const auto all = pmrkit::strategies();
  for (const auto& line : lines_of(source_dir + "/tests/strategies/list.txt")) {
    const std::string name = trimmed(line.substr(0, line.find('#')));
    if (name.empty()) continue;
    CAPTURE(name);
    CHECK(std::none_of(all.begin(), all.end(), [&](const auto& s) { return s.name == name; }));
  }
}

TEST_CASE("docs/strategies.md agrees with the registry", "[registry][docs]") {
  const auto all = pmrkit::strategies();
  const auto lines = lines_of(source_dir + "/docs/strategies.md");

  SECTION("the overview table: every strategy, with its capabilities") {
    std::set<std::string> documented;
    for (const auto& row : table_rows(lines, "## Strategies at a glance")) {
      REQUIRE(row.size() >= 4);
      const auto names = code_spans(row[0]);
      REQUIRE(names.size() == 1);
      CAPTURE(names[0]);
      documented.insert(names[0]);
      const auto& s = find_info(all, names[0]);
      CHECK(row[1].rfind(s.thread_safe ? "yes" : "no", 0) == 0);
      CHECK((row[1].find("creating thread") != std::string::npos) == s.bound_to_thread);
      CHECK((row[2] == "upstream") == s.uses_upstream);
      CHECK((row[3].rfind("no", 0) == 0) == !s.reuses_memory);
    }
    std::set<std::string> registered;
    for (const auto& s : all) registered.insert(s.name);
    CHECK(documented == registered);
  }

  SECTION("the option table: every option's name, default, range and meaning") {
    const auto documented = table_rows(lines, "## Options");
    const auto expected = expected_option_rows(all);
    CHECK(documented == expected);
    if (documented != expected)  // unwrapped, to paste into the docs
      std::cout << "docs/strategies.md, section \"## Options\", should read:\n"
                << as_markdown(expected);
  }
}

TEST_CASE("the spec fuzzer's dictionary holds every name, option and choice", "[registry][fuzz]") {
  std::set<std::string> tokens;
  for (const auto& line : lines_of(source_dir + "/tests/fuzz/dict/spec.dict"))
    if (line.size() >= 2 && line.front() == '"' && line.back() == '"')
      tokens.insert(line.substr(1, line.size() - 2));
  std::set<std::string> words;  // every token the registry defines
  for (const auto& s : pmrkit::strategies()) {
    words.insert(s.name);
    for (const auto& o : s.options) {
      words.insert(o.name + "=");
      for (const auto& a : o.allowed) words.insert(a);
    }
  }
  for (const auto& w : words) {
    CAPTURE(w);
    CHECK(tokens.count(w) == 1);
  }
  // ...and no stale one: a lower-case word (with or without '=') the registry no longer has.
  for (const auto& t : tokens) {
    const bool word = !t.empty() && t.front() >= 'a' && t.front() <= 'z' &&
                      std::all_of(t.begin(), t.end(), [](char c) {
      return (c >= 'a' && c <= 'z') || c == '_' || c == '=';
    });
    CAPTURE(t);
    if (word) CHECK(words.count(t) == 1);
  }
}
