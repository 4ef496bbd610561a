// What fuzzing found, each as a named test (the raw inputs also sit in
// tests/fuzz/regressions/<target>/ and are replayed by fuzz_replay_<target>).
#include <catch2/catch.hpp>
#include <cstddef>
#include <new>
#include <span>
#include <string>
#include <string_view>

#include "pmrkit/buffer_pool.hpp"
#include "pmrkit/counting_resource.hpp"
#include "pmrkit/datagram/syslog_framer.hpp"
#include "pmrkit/testing/fault_injecting_resource.hpp"

namespace dg = pmrkit::datagram;

namespace {

std::span<const std::byte> bytes(std::string_view text) {
  return {reinterpret_cast<const std::byte*>(text.data()), text.size()};
}

}  // namespace

// tcp_framing, found in the first minute: with max_frame_size = 1 GiB, the octet count
// "891234563 " makes the framer ask the pool for the whole declared frame at once; the fuzz
// harness's upstream refused it and the std::bad_alloc escaped the harness. The framer was
// right (documented: it is left aborted); the harness now expects this outcome.
TEST_CASE("fuzz regression: a huge declared octet count fails cleanly when memory is refused",
          "[fuzz_regression][datagram]") {
  pmrkit::testing::fault_injecting_resource memory;
  memory.fail_at(1, true);
  pmrkit::buffer_pool pool(&memory);
  dg::syslog_framer framer(pool, {.mode = dg::framing::automatic, .max_frame_size = 1u << 30});
  int frames = 0;
  const auto on_frame = [&](std::span<const std::byte>) { ++frames; };
  CHECK(framer.feed(bytes("&e\r\n14 a\t7xxxxxxxxxxx"), on_frame) == dg::framing_error::none);
  CHECK(frames == 2);
  CHECK_THROWS_AS(framer.feed(bytes("891234563 7\0""89"), on_frame), std::bad_alloc);
  CHECK(framer.error() == dg::framing_error::aborted);
  CHECK(framer.feed(bytes("5 hello"), on_frame) == dg::framing_error::aborted);
  framer.reset();
  memory.disarm();
  CHECK(framer.feed(bytes("5 hello"), on_frame) == dg::framing_error::none);
  CHECK(frames == 3);
}

// The same input once made the framer reserve a whole declared frame (up to max_frame_size)
// from a ten-byte count, before any of it arrived: a cheap way for a peer to pin memory. The
// partial frame now grows with what was received.
TEST_CASE("syslog_framer holds no more than it has received for a partial frame",
          "[datagram]") {
  pmrkit::counting_resource memory(std::pmr::new_delete_resource());
  pmrkit::buffer_pool_options o;
  o.max_capacity = 64 << 20;
  pmrkit::buffer_pool pool(&memory, o);
  dg::syslog_framer framer(pool,
                           {.mode = dg::framing::octet_counting, .max_frame_size = 64u << 20});
  CHECK(framer.feed(bytes("60000000 abc"), [](std::span<const std::byte>) {}) ==
        dg::framing_error::none);
  INFO("bytes held for a partial frame after receiving 12 bytes: "
       << memory.stats().bytes_in_use);
  CHECK(memory.stats().bytes_in_use < 64 * 1024);
}
