#include "pmrkit/protobuf/span_transport.hpp"

#include <catch2/catch.hpp>

#include <chrono>
#include <new>
#include <future>
#include <string>
#include <thread>
#include <vector>

#include "../datagram/net_test_support.hpp"
#include "pmrkit/counting_resource.hpp"
#include "pmrkit/datagram/errors.hpp"
#include "global_heap.hpp"
#include "open_descriptors.hpp"

namespace {

using namespace pmrkit::protobuf;
using pmrkit::test::net::poll_until;
using pmrkit::test::net::udp_sender;
using namespace std::chrono_literals;

span numbered(int i) {
  span s;
  s.trace_id = 1000 + i;
  s.id = i;
  s.service = "svc";
  s.name = "operation " + std::to_string(i);
  s.tags = {{"n", std::to_string(i)}};
  if (i % 2) {
    sample m;
    m.metric = metric_type::counter;
    m.name = "requests";
    m.value = static_cast<float>(i);
    s.metrics.push_back(m);
  }
  return s;
}

TEST_CASE("span_sender batches spans that span_receiver parses", "[protobuf][udp]") {
  pmrkit::counting_resource counted;
  {
    span_receiver rx({.receive_buffer_size = 1 << 20}, &counted);
    span_sender tx({.port = rx.local_port(), .batch_size = 16}, &counted);
    constexpr int count = 100;
    for (int i = 0; i < count; ++i) tx.send(numbered(i));
    CHECK(tx.queued() == count % 16);
    CHECK(tx.flush() == count % 16);
    CHECK(tx.queued() == 0);
    std::vector<span> got;
    poll_until(
        [&] { return got.size() >= count; },
        [&] { rx.poll_once(100ms, [&](const span_view& v) { got.push_back(v.to_span()); }); });
    REQUIRE(got.size() == count);
    for (int i = 0; i < count; ++i) CHECK(got[static_cast<std::size_t>(i)] == numbered(i));
    const span_sender_stats sent = tx.stats();
    CHECK(sent.sent == count);
    CHECK(sent.batches == (count + 15) / 16);
    CHECK(sent.send_errors == 0);
    CHECK(rx.stats().parser.parsed == count);
    CHECK(rx.stats().udp.received == count);
  }
  CHECK(counted.stats().bytes_in_use == 0);
}

TEST_CASE("span_receiver counts a datagram that is not a span and goes on", "[protobuf][udp]") {
  span_receiver rx;
  udp_sender garbage(rx.local_port());
  REQUIRE(garbage.send("\xff\xff\xff\xff not a span"));
  span_sender tx({.port = rx.local_port(), .batch_size = 1});
  tx.send(numbered(3));
  std::vector<span> got;
  poll_until([&] { return !got.empty(); },
             [&] { rx.poll_once(100ms, [&](const span_view& v) { got.push_back(v.to_span()); }); });
  REQUIRE(got.size() == 1);
  CHECK(got[0] == numbered(3));
  CHECK(rx.stats().parser.parse_errors == 1);
  CHECK(rx.stats().udp.received == 2);
}

TEST_CASE("span_receiver keeps the arena block a huge span taught it", "[protobuf][udp]") {
  // The receiver's pool freed blocks over 1 MiB on return while the parser learned blocks of
  // up to 4 MiB: after one huge span, every parse allocated 4 MiB.
  pmrkit::counting_resource counted;
  {
    span_receiver rx({.receive_buffer_size = 1 << 20}, &counted);
    udp_sender raw(rx.local_port());
    std::string hostile;
    for (int i = 0; i < 32'000; ++i) hostile += std::string("\x52\x00", 2);  // empty metrics
    REQUIRE(raw.send(hostile));
    span_sender tx({.port = rx.local_port(), .batch_size = 1}, &counted);
    tx.send(numbered(1));
    std::size_t got = 0;
    poll_until([&] { return got == 2; },
               [&] { rx.poll_once(100ms, [&](const span_view&) { ++got; }); });
    REQUIRE(got == 2);
    CHECK(rx.stats().parser.arena_block == std::size_t{4} << 20);
    const auto warm = counted.stats().allocations;
    for (int i = 0; i < 20; ++i) tx.send(numbered(i));
    poll_until([&] { return got == 22; },
               [&] { rx.poll_once(100ms, [&](const span_view&) { ++got; }); });
    REQUIRE(got == 22);
    CHECK(counted.stats().allocations == warm);
  }
  CHECK(counted.stats().bytes_in_use == 0);
}

TEST_CASE("span_sender drops a span too large for a datagram, and counts it", "[protobuf]") {
  span_receiver rx;
  span_sender tx({.port = rx.local_port(), .batch_size = 4});
  span huge = numbered(1);
  huge.name = std::string(max_datagram_payload, 'x');
  tx.send(huge);
  CHECK(tx.queued() == 0);
  CHECK(tx.stats().too_large == 1);
}

TEST_CASE("span_sender counts what the kernel refuses instead of throwing", "[protobuf]") {
  std::uint16_t closed_port;
  {
    span_receiver gone;  // bind, note the port, close: nobody listens there now
    closed_port = gone.local_port();
  }
  span_sender tx({.port = closed_port, .batch_size = 1});
  // The first datagram draws an ICMP "port unreachable"; a later send reports it.
  poll_until([&] { return tx.stats().send_errors > 0; }, [&] {
    tx.send(numbered(1));
    std::this_thread::sleep_for(1ms);
  }, 5s);
  CHECK(tx.stats().send_errors > 0);
}

TEST_CASE("span_sender counts each sendmmsg call, a batch split by a refusal too",
          "[protobuf]") {
  std::uint16_t closed_port;
  {
    span_receiver gone;
    closed_port = gone.local_port();
  }
  span_sender tx({.port = closed_port, .batch_size = 4});
  std::uint64_t flushes = 0;
  // A refused span ends its call; the rest of its batch takes another one.
  poll_until([&] { return tx.stats().send_errors > 0; }, [&] {
    for (int i = 0; i < 4; ++i) tx.send(numbered(i));  // the fourth flushes
    ++flushes;
    std::this_thread::sleep_for(1ms);
  }, 5s);
  const auto stats = tx.stats();
  REQUIRE(stats.send_errors > 0);
  CHECK(stats.sent + stats.send_errors == 4 * flushes);
  CHECK(stats.batches > flushes);
  CHECK(stats.batches <= stats.sent + stats.send_errors);  // each call sends or skips one
}

TEST_CASE("span_receiver::run stops promptly on stop()", "[protobuf][udp][concurrent]") {
  span_receiver rx;
  auto running = std::async(std::launch::async, [&] { return rx.run([](const span_view&) {}); });
  span_sender tx({.port = rx.local_port(), .batch_size = 1});
  tx.send(numbered(1));
  poll_until([&] { return rx.stats().parser.parsed == 1; },
             [] { std::this_thread::sleep_for(1ms); });
  rx.stop();
  REQUIRE(running.wait_for(10s) == std::future_status::ready);
  CHECK(running.get() == 1);
}

TEST_CASE("span_sender rejects bad options", "[protobuf]") {
  using pmrkit::datagram::invalid_option;
  CHECK_THROWS_AS(span_sender({.port = 0}), invalid_option);
  CHECK_THROWS_AS(span_sender({.port = 9, .batch_size = 0}), invalid_option);
  CHECK_THROWS_AS(span_sender({.address = "not-an-address", .port = 9}), invalid_option);
}

TEST_CASE("span_receiver rejects bad options before it reads them", "[protobuf]") {
  using pmrkit::datagram::invalid_option;
  // Its pool was sized from them first: bit_ceil of 2^63 + 1 is undefined (UBSan reports it).
  CHECK_THROWS_WITH(span_receiver({.max_datagram_size = (std::size_t{1} << 63) + 1}),
                    Catch::Matchers::Contains("max_datagram_size"));
  CHECK_THROWS_WITH(span_receiver({.batch_size = std::size_t{1} << 63}),
                    Catch::Matchers::Contains("batch_size"));
  CHECK_THROWS_AS(span_receiver({}, std::pmr::new_delete_resource(),
                                {.max_arena_block = std::size_t{1} << 63}),
                  std::invalid_argument);
}

TEST_CASE("span_sender whose construction runs out of memory leaves no socket open",
          "[protobuf]") {
  // Its vectors were sized after the socket was made, and a constructor that throws never
  // runs the destructor that closes it.
  namespace heap = pmrkit::test::global_heap;
  using pmrkit::test::open_descriptors;
  const std::size_t before = open_descriptors();
  bool failed_once = false;
  for (std::uint64_t n = 1; n < 200; ++n) {
    heap::fail_at(n);
    try {
      span_sender tx({.port = 9, .batch_size = 64}, std::pmr::new_delete_resource());
    } catch (const std::bad_alloc&) {
    }
    const bool fired = heap::fired();
    heap::disarm();
    if (!fired) break;
    failed_once = true;
    INFO("the " << n << "th allocation failed");
    CHECK(open_descriptors() == before);
  }
  CHECK(failed_once);
}

}  // namespace
