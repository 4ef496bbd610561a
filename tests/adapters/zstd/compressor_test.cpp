// compressor: round trips across levels, windows and sizes (which also proves the static
// workspace is large enough for every input), frames the zstd tool reads, and a context whose
// memory is exactly what it reports, bounded by window_log, taken once and all given back.
#include <catch2/catch.hpp>

#include <vector>

#include "pmrkit/buffer_pool.hpp"
#include "pmrkit/counting_resource.hpp"
#include "pmrkit/zstd/compressor.hpp"
#include "pmrkit/zstd/decompressor.hpp"
#include "pmrkit/zstd/errors.hpp"
#include "test_resources.hpp"
#include "zstd_test_support.hpp"

namespace {

using pmrkit::zstd::compressor;
using pmrkit::zstd::compressor_options;
using pmrkit::zstd::decompressor;
using bytes = std::vector<std::byte>;

bytes round_trip(compressor& c, const bytes& input) {
  pmrkit::byte_buffer frame(std::pmr::new_delete_resource());
  c.compress(input, frame);
  decompressor d;
  pmrkit::byte_buffer out(std::pmr::new_delete_resource());
  d.decompress(frame.span(), out);
  return {out.data(), out.data() + out.size()};
}

}  // namespace

TEST_CASE("round trips across levels, windows and input sizes", "[zstd][compressor]") {
  struct config {
    int level;
    int window_log;
  };
  const config configs[] = {{-5, 20}, {1, 10}, {3, 14}, {3, 20}, {9, 17}, {19, 16}};
  const std::size_t sizes[] = {0, 1, 100, 16 * 1024, 16 * 1024 + 1, 130 * 1024, 300 * 1024};
  for (const auto& cfg : configs) {
    compressor c(std::pmr::new_delete_resource(),
                 {.level = cfg.level, .window_log = cfg.window_log});
    for (const std::size_t size : sizes) {
      INFO("level " << cfg.level << " window_log " << cfg.window_log << " size " << size);
      const bytes input = pmrkit::zstd::test::payload(size, static_cast<unsigned>(size));
      CHECK(round_trip(c, input) == input);
      const bytes noise = pmrkit::zstd::test::random_bytes(size);
      CHECK(round_trip(c, noise) == noise);
    }
  }
}

TEST_CASE("a larger input at the top window and level still fits the workspace",
          "[zstd][compressor]") {
  compressor c(std::pmr::new_delete_resource(), {.level = 3, .window_log = 20});
  const bytes input = pmrkit::zstd::test::payload(3 * 1024 * 1024);
  CHECK(round_trip(c, input) == input);
}

TEST_CASE("compress appends to the destination and grows it through its own resource",
          "[zstd][compressor]") {
  pmrkit::counting_resource buffers(std::pmr::new_delete_resource());
  pmrkit::counting_resource contexts(std::pmr::new_delete_resource());
  {
    pmrkit::buffer_pool pool(&buffers);
    compressor c(&contexts);
    const auto context_allocations = contexts.stats().allocations;
    pmrkit::byte_buffer out = pool.acquire(16);
    const std::byte marker[] = {std::byte{0xAA}, std::byte{0xBB}};
    out.append(marker);
    const bytes input = pmrkit::zstd::test::payload(50'000);
    const std::size_t n = c.compress(input, out);
    CHECK(out.size() == 2 + n);
    CHECK(out.data()[0] == std::byte{0xAA});
    CHECK(out.data()[1] == std::byte{0xBB});
    CHECK(out.pool() == &pool);
    CHECK(buffers.stats().allocations > 0);
    CHECK(contexts.stats().allocations == context_allocations);  // compress takes nothing more

    decompressor d;
    pmrkit::byte_buffer plain(std::pmr::new_delete_resource());
    d.decompress(out.span().subspan(2), plain);
    CHECK(bytes(plain.data(), plain.data() + plain.size()) == input);
  }
  CHECK(buffers.stats().bytes_in_use == 0);
  CHECK(contexts.stats().bytes_in_use == 0);
}

TEST_CASE("context memory is what memory_bytes() reports, fixed, and all returned",
          "[zstd][compressor]") {
  pmrkit::counting_resource counted(std::pmr::new_delete_resource());
  {
    compressor c(&counted);
    CHECK(counted.stats().bytes_in_use == c.memory_bytes());
    CHECK(c.memory_bytes() == compressor::memory_bound(c.options()));
    const auto allocations = counted.stats().allocations;
    pmrkit::byte_buffer out(std::pmr::new_delete_resource());
    for (std::size_t size : {10u, 5000u, 100000u, 1000000u}) {
      out.clear();
      c.compress(pmrkit::zstd::test::payload(size), out);
    }
    CHECK(counted.stats().allocations == allocations);
    CHECK(counted.stats().bytes_in_use == c.memory_bytes());

    compressor moved(std::move(c));
    CHECK(counted.stats().bytes_in_use == moved.memory_bytes());
    CHECK(c.memory_bytes() == 0);  // NOLINT(bugprone-use-after-move)
    CHECK_THROWS_AS(c.compress(pmrkit::zstd::test::payload(10), out), std::logic_error);
  }
  CHECK(counted.stats().bytes_in_use == 0);
  CHECK(counted.stats().blocks_in_use() == 0);
}

TEST_CASE("move assignment frees the old context once and keeps the new one whole",
          "[zstd][compressor][move]") {
  pmrkit::counting_resource first(std::pmr::new_delete_resource());
  pmrkit::counting_resource second(std::pmr::new_delete_resource());
  const bytes input = pmrkit::zstd::test::payload(5000);
  {
    compressor target(&first, {.level = 1});
    compressor source(&second, {.level = 5});
    target = std::move(source);  // over a live object
    CHECK(first.stats().bytes_in_use == 0);
    CHECK(first.stats().blocks_in_use() == 0);
    CHECK(second.stats().bytes_in_use == target.memory_bytes());
    CHECK(target.options().level == 5);
    CHECK(source.memory_bytes() == 0);  // NOLINT(bugprone-use-after-move)
    CHECK(round_trip(target, input) == input);

    compressor& same = target;
    target = std::move(same);  // self-move: a no-op
    CHECK(second.stats().bytes_in_use == target.memory_bytes());
    CHECK(round_trip(target, input) == input);

    source = std::move(target);  // into a moved-from object, and back
    target = std::move(source);
    CHECK(round_trip(target, input) == input);
  }
  CHECK(first.stats().deallocations == first.stats().allocations);
  CHECK(second.stats().deallocations == second.stats().allocations);
  CHECK(second.stats().bytes_in_use == 0);
}

TEST_CASE("window_log bounds the context's memory", "[zstd][compressor]") {
  for (int level : {1, 3, 9}) {
    std::size_t previous = 0;
    for (int w = 10; w <= 20; ++w) {
      pmrkit::counting_resource counted(std::pmr::new_delete_resource());
      compressor c(&counted, {.level = level, .window_log = w});
      INFO("level " << level << " window_log " << w);
      CHECK(counted.stats().peak_bytes_in_use == c.memory_bytes());
      CHECK(c.memory_bytes() >= previous);  // never more memory for a smaller window
      previous = c.memory_bytes();
    }
  }
  const auto small = compressor::memory_bound({.level = 3, .window_log = 12});
  const auto large = compressor::memory_bound({.level = 3, .window_log = 20});
  CHECK(small * 4 < large);
  CHECK(compressor::memory_bound({.level = 19, .window_log = 14}) * 10 <
        compressor::memory_bound({.level = 19, .window_log = 20}));
}

TEST_CASE("bad options are rejected with the allowed range", "[zstd][compressor]") {
  CHECK_THROWS_AS(compressor(std::pmr::new_delete_resource(), {.level = 99}),
                  std::invalid_argument);
  CHECK_THROWS_AS(compressor(std::pmr::new_delete_resource(), {.window_log = 9}),
                  std::invalid_argument);
  CHECK_THROWS_AS(compressor(std::pmr::new_delete_resource(), {.window_log = 28}),
                  std::invalid_argument);
  CHECK_THROWS_WITH(compressor(std::pmr::new_delete_resource(), {.window_log = 40}),
                    Catch::Matchers::Contains("allowed 10..27"));
  CHECK_THROWS_AS(compressor(nullptr), std::invalid_argument);
}

TEST_CASE("a resource that fails leaves nothing allocated", "[zstd][compressor]") {
  pmrkit::test::failing_resource failing(std::pmr::new_delete_resource());
  pmrkit::counting_resource counted(&failing);
  failing.allow(1);  // the state, then the workspace fails
  CHECK_THROWS_AS(compressor(&counted), std::bad_alloc);
  CHECK(counted.stats().bytes_in_use == 0);

  // A destination that cannot grow is left as it was.
  failing.allow_all();
  compressor c(std::pmr::new_delete_resource());
  pmrkit::byte_buffer out(&counted);
  out.append("ab", 2);
  failing.allow(0);
  CHECK_THROWS_AS(c.compress(pmrkit::zstd::test::payload(100000), out), std::bad_alloc);
  CHECK(out.size() == 2);
  failing.allow_all();
}

#ifdef PMRKIT_TEST_ZSTD_CLI
TEST_CASE("the zstd command-line tool decompresses what compress() writes", "[zstd][cli]") {
  for (const bool checksum : {false, true}) {
    compressor c(std::pmr::new_delete_resource(),
                 {.level = 3, .window_log = 20, .checksum = checksum});
    const bytes input = pmrkit::zstd::test::payload(200'000);
    pmrkit::byte_buffer frame(std::pmr::new_delete_resource());
    c.compress(input, frame);
    bool ok = false;
    CHECK(pmrkit::zstd::test::zstd_cli_decompress(PMRKIT_TEST_ZSTD_CLI, frame.span(), ok) == input);
    CHECK(ok);

    // Two frames back to back decompress to both inputs, in order.
    const bytes second = pmrkit::zstd::test::payload(1000, 99);
    c.compress(second, frame);
    bytes both = input;
    both.insert(both.end(), second.begin(), second.end());
    CHECK(pmrkit::zstd::test::zstd_cli_decompress(PMRKIT_TEST_ZSTD_CLI, frame.span(), ok) == both);
    CHECK(ok);
  }
}

TEST_CASE("the zstd tool notices a corrupted frame (the test can fail)", "[zstd][cli]") {
  compressor c(std::pmr::new_delete_resource(), {.checksum = true});
  pmrkit::byte_buffer frame(std::pmr::new_delete_resource());
  c.compress(pmrkit::zstd::test::payload(10'000), frame);
  frame.data()[frame.size() / 2] ^= std::byte{0x5A};
  bool ok = true;
  pmrkit::zstd::test::zstd_cli_decompress(PMRKIT_TEST_ZSTD_CLI, frame.span(), ok);
  CHECK_FALSE(ok);
}
#endif
