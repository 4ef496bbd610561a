#include "pmrkit/datagram/udp_receiver.hpp"

#include <catch2/catch.hpp>

#include <atomic>
#include <chrono>
#include <future>
#include <set>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

#include "net_test_support.hpp"
#include "pmrkit/buffer_pool.hpp"
#include "pmrkit/counting_resource.hpp"
#include "pmrkit/datagram/errors.hpp"
#include "pmrkit/datagram/udp_socket.hpp"
#include "test_resources.hpp"

namespace {

using namespace pmrkit::datagram;
using pmrkit::test::net::as_string;
using pmrkit::test::net::poll_until;
using pmrkit::test::net::udp_sender;
using namespace std::chrono_literals;

std::string message(int i) { return "<13>1 - host app - - - message number " + std::to_string(i); }

// Receives until `count` datagrams were handed on (or the deadline passed).
std::vector<std::string> receive(udp_receiver& rx, std::size_t count) {
  std::vector<std::string> got;
  poll_until(
      [&] { return got.size() >= count; },
      [&] { rx.poll_once(100ms, [&](datagram& d) { got.push_back(as_string(d.bytes())); }); });
  return got;
}

TEST_CASE("udp_receiver hands on every datagram with its bytes and sender", "[udp]") {
  pmrkit::counting_resource counted;
  {
    udp_receiver rx({.receive_buffer_size = 1 << 20}, &counted);
    REQUIRE(rx.local_port() != 0);
    udp_sender tx(rx.local_port());
    constexpr int count = 100;
    for (int i = 0; i < count; ++i) REQUIRE(tx.send(message(i)));
    std::vector<std::string> got;
    std::set<std::uint16_t> ports;
    poll_until([&] { return got.size() >= count; }, [&] {
      rx.poll_once(100ms, [&](datagram& d) {
        got.push_back(as_string(d.bytes()));
        ports.insert(d.peer.port());
        CHECK(d.peer.to_string() == "127.0.0.1:" + std::to_string(tx.port()));
      });
    });
    REQUIRE(got.size() == count);
    for (int i = 0; i < count; ++i) CHECK(got[static_cast<std::size_t>(i)] == message(i));
    CHECK(ports == std::set<std::uint16_t>{tx.port()});
    const udp_receiver_stats stats = rx.stats();
    CHECK(stats.received == count);
    CHECK(stats.truncated == 0);
    CHECK(stats.kernel_drops == 0);
    CHECK(stats.batches >= 1);
    CHECK(stats.batches <= count);
    // Buffers came from the chosen resource, and were reused: far fewer than one per datagram.
    CHECK(counted.stats().allocations > 0);
    CHECK(rx.pool().stats().misses <= rx.options().batch_size + 1);
  }
  CHECK(counted.stats().bytes_in_use == 0);
}

TEST_CASE("udp_receiver counts datagrams over max_datagram_size and never hands them on cut",
          "[udp]") {
  udp_receiver rx({.max_datagram_size = 512});
  udp_sender tx(rx.local_port());
  REQUIRE(tx.send(std::string(1000, 'x')));
  REQUIRE(tx.send(std::string(512, 'y')));  // exactly the maximum: fine
  REQUIRE(tx.send(std::string(513, 'z')));
  REQUIRE(tx.send("after"));
  const std::vector<std::string> got = receive(rx, 2);
  REQUIRE(got.size() == 2);
  CHECK(got[0] == std::string(512, 'y'));
  CHECK(got[1] == "after");
  poll_until([&] { return rx.stats().truncated >= 2; },
             [&] { rx.poll_once(10ms, [](datagram&) {}); }, 2s);
  CHECK(rx.stats().truncated == 2);
  CHECK(rx.stats().received == 2);
}

TEST_CASE("udp_socket reports a truncated datagram's real size", "[udp]") {
  udp_socket socket({});
  udp_sender tx(socket.local_port());
  REQUIRE(tx.send(std::string(300, 'a')));
  std::byte storage[100];
  receive_slot slot;
  slot.buffer = storage;
  std::size_t got = 0;
  poll_until([&] { return got == 1; }, [&] {
    socket.wait(100ms);
    got = socket.receive({&slot, 1});
  });
  REQUIRE(got == 1);
  CHECK(slot.truncated);
  CHECK(slot.datagram_size == 300);
  CHECK(slot.length == 100);
}

TEST_CASE("udp_receiver lets the handler keep a buffer, which returns to the pool later",
          "[udp]") {
  pmrkit::counting_resource counted;
  {
    pmrkit::buffer_pool pool(&counted);
    std::vector<pmrkit::byte_buffer> kept;
    {
      udp_receiver rx({.max_datagram_size = 4096, .batch_size = 4}, pool);
      udp_sender tx(rx.local_port());
      for (int i = 0; i < 10; ++i) REQUIRE(tx.send(message(i)));
      std::size_t seen = 0;
      poll_until([&] { return seen >= 10; }, [&] {
        seen += rx.poll_once(100ms, [&](datagram& d) {
          if (d.bytes().size() % 2 == 0 || kept.size() < 3) kept.push_back(std::move(d.buffer));
        });
      });
      REQUIRE(seen == 10);
      REQUIRE(kept.size() >= 3);
      // More traffic reuses the armed buffers; the kept ones must be untouched by it.
      for (int i = 0; i < 20; ++i) REQUIRE(tx.send(std::string(200, 'q')));
      seen = 0;
      poll_until([&] { return seen >= 20; },
                 [&] { seen += rx.poll_once(100ms, [](datagram&) {}); });
      REQUIRE(seen == 20);
    }
    std::set<std::string> expected;
    for (int i = 0; i < 10; ++i) expected.insert(message(i));
    for (const auto& b : kept) {
      CHECK(expected.count(as_string(b.span())) == 1);
      CHECK(b.pool() == &pool);
    }
    // The receiver is gone: every buffer not kept is back in the pool.
    CHECK(counted.stats().bytes_in_use ==
          pool.stats().bytes_retained + [&] {
            std::uint64_t sum = 0;
            for (const auto& b : kept) sum += b.capacity();
            return sum;
          }());
    kept.clear();
    const pmrkit::buffer_pool_stats stats = pool.stats();
    CHECK(counted.stats().bytes_in_use == stats.bytes_retained);
    CHECK(stats.buffers_retained == stats.misses);  // nothing lost, nothing freed early
  }
  CHECK(counted.stats().bytes_in_use == 0);
}

TEST_CASE("udp_receiver::stop ends run() promptly from another thread", "[udp][concurrent]") {
  udp_receiver rx;
  std::promise<std::uint64_t> done;
  auto result = done.get_future();
  std::thread runner([&] { done.set_value(rx.run([](datagram&) {})); });
  udp_sender tx(rx.local_port());
  REQUIRE(tx.send("one"));
  poll_until([&] { return rx.stats().received == 1; }, [] { std::this_thread::sleep_for(1ms); });
  rx.stop();
  const bool stopped = result.wait_for(10s) == std::future_status::ready;
  if (!stopped) {
    // Unblock the thread so the test can end, then fail.
    udp_sender(rx.local_port()).send("wake");
  }
  runner.join();
  REQUIRE(stopped);
  CHECK(result.get() == 1);
  CHECK(rx.stop_requested());
  // Sticky: a later run() returns at once, and poll_once() does not wait.
  CHECK(rx.run([](datagram&) {}) == 0);
  CHECK(rx.poll_once(-1ms, [](datagram&) {}) == 0);
}

TEST_CASE("udp_receiver::stop interrupts a long poll_once wait", "[udp][concurrent]") {
  udp_receiver rx;
  auto waiting =
      std::async(std::launch::async, [&] { return rx.poll_once(60s, [](datagram&) {}); });
  std::this_thread::sleep_for(20ms);  // let it block in poll(); stop works either way
  rx.stop();
  REQUIRE(waiting.wait_for(10s) == std::future_status::ready);
  CHECK(waiting.get() == 0);
}

TEST_CASE("udp_receiver::poll_once with the longest timeout waits, not returns at once",
          "[udp][concurrent]") {
  // now + milliseconds::max() overflowed into the past: the wait ended before it began.
  udp_receiver rx;
  std::atomic<bool> stopping{false};
  std::thread stopper([&] {
    std::this_thread::sleep_for(100ms);
    stopping = true;
    rx.stop();
  });
  CHECK(rx.poll_once(std::chrono::milliseconds::max(), [](datagram&) {}) == 0);
  CHECK(stopping.load());  // it returned because of stop(), not before
  stopper.join();
}

TEST_CASE("udp_receiver::run hands on what a throwing handler left before it waits",
          "[udp][concurrent]") {
  // run() waited for the socket first, so the rest of the batch waited for a new datagram.
  udp_receiver rx({.batch_size = 16});
  udp_sender tx(rx.local_port());
  for (int i = 0; i < 3; ++i) REQUIRE(tx.send(message(i)));
  std::this_thread::sleep_for(50ms);  // let all three queue, so one batch holds them
  CHECK_THROWS_AS(rx.run([](datagram&) { throw std::runtime_error("handler failed"); }),
                  std::runtime_error);
  std::vector<std::string> got;
  std::atomic<bool> late_sent{false};
  // Should run() wait anyway, a late datagram, then stop(), end it: the test fails, not hangs.
  std::thread watchdog([&] {
    std::this_thread::sleep_for(2s);
    late_sent = true;
    tx.send("late");
    std::this_thread::sleep_for(1s);
    rx.stop();
  });
  rx.run([&](datagram& d) {
    got.push_back(as_string(d.bytes()));
    if (got.size() == 2) {
      CHECK_FALSE(late_sent.load());
      rx.stop();
    }
  });
  watchdog.join();
  REQUIRE(got.size() == 2);
  CHECK(got[0] == message(1));
  CHECK(got[1] == message(2));
}

TEST_CASE("udp_receiver::run after stop() hands on nothing, even what a handler left",
          "[udp]") {
  udp_receiver rx({.batch_size = 16});
  udp_sender tx(rx.local_port());
  for (int i = 0; i < 3; ++i) REQUIRE(tx.send(message(i)));
  std::this_thread::sleep_for(50ms);  // let all three queue, so one batch holds them
  CHECK_THROWS_AS(rx.poll_once(1s, [](datagram&) { throw std::runtime_error("handler failed"); }),
                  std::runtime_error);
  rx.stop();
  int calls = 0;
  CHECK(rx.run([&](datagram&) { ++calls; }) == 0);
  CHECK(calls == 0);
  // The two left are not lost: the next call that takes them hands them on.
  std::vector<std::string> got;
  CHECK(rx.receive_batch([&](datagram& d) { got.push_back(as_string(d.bytes())); }) == 2);
  CHECK(got == std::vector<std::string>{message(1), message(2)});
}

TEST_CASE("udp_receiver::receive_batch does not wait when nothing is queued", "[udp]") {
  udp_receiver rx;
  CHECK(rx.receive_batch([](datagram&) { FAIL("no datagram was sent"); }) == 0);
  CHECK(rx.stats().batches == 0);
}

TEST_CASE("udp_receiver hands on an empty datagram", "[udp]") {
  udp_receiver rx;
  udp_sender tx(rx.local_port());
  REQUIRE(tx.send(std::string_view{}));
  REQUIRE(tx.send("x"));
  const auto got = receive(rx, 2);
  REQUIRE(got.size() == 2);
  CHECK(got[0].empty());
  CHECK(got[1] == "x");
}

TEST_CASE("udp_receiver keeps the rest of a batch when the handler throws", "[udp]") {
  udp_receiver rx({.batch_size = 16});
  udp_sender tx(rx.local_port());
  for (int i = 0; i < 5; ++i) REQUIRE(tx.send(message(i)));
  std::this_thread::sleep_for(50ms);  // let all five queue, so one batch holds them
  std::vector<std::string> got;
  bool thrown = false;
  auto handler = [&](datagram& d) {
    got.push_back(as_string(d.bytes()));
    if (got.size() == 2 && !thrown) {
      thrown = true;
      throw std::runtime_error("handler failed");
    }
  };
  bool caught = false;
  poll_until([&] { return got.size() >= 5; }, [&] {
    try {
      rx.poll_once(100ms, handler);
    } catch (const std::runtime_error&) {
      caught = true;
    }
  });
  CHECK(caught);
  REQUIRE(got.size() == 5);
  for (int i = 0; i < 5; ++i) CHECK(got[static_cast<std::size_t>(i)] == message(i));
}

TEST_CASE("udp_receiver reads the kernel's drop counter", "[udp]") {
  // The smallest receive buffer the kernel allows holds only a few datagrams.
  udp_receiver rx({.receive_buffer_size = 1});
  udp_sender tx(rx.local_port());
  constexpr int sent = 200;
  for (int i = 0; i < sent; ++i) tx.send(std::string(1000, 'd'));
  std::size_t got = 0;
  // Drain what was queued: each call hands some on until the queue is empty and one times out.
  while (rx.poll_once(200ms, [&](datagram&) { ++got; }) > 0) {
  }
  REQUIRE(got > 0);
  REQUIRE(got < static_cast<std::size_t>(sent));
  // The counter travels with datagrams queued after the drops.
  REQUIRE(tx.send("after the drops"));
  std::size_t after = 0;
  poll_until([&] { return after >= 1; }, [&] { after += rx.poll_once(100ms, [](datagram&) {}); });
  CHECK(rx.stats().kernel_drops == sent - got);
}

TEST_CASE("udp_receiver rejects bad options with a message saying what is allowed", "[udp]") {
  CHECK_THROWS_MATCHES(udp_receiver({.max_datagram_size = 0}), invalid_option,
                       Catch::Matchers::Message(
                           "max_datagram_size 0 is out of range; allowed: 1..65536 bytes"));
  CHECK_THROWS_AS(udp_receiver({.max_datagram_size = 70000}), invalid_option);
  // Checked before anything reads it: the pool's bucket was sized from it first (bit_ceil of
  // 2^63 + 1, undefined behaviour that UBSan reports).
  CHECK_THROWS_AS(udp_receiver({.max_datagram_size = (std::size_t{1} << 63) + 1}), invalid_option);
  // Named as the option is named here, not as the socket underneath names it.
  CHECK_THROWS_MATCHES(udp_receiver({.batch_size = 0}), invalid_option,
                       Catch::Matchers::Message(
                           "batch_size 0 is out of range; allowed: 1..1024"));
  CHECK_THROWS_WITH(udp_receiver({.batch_size = 5000}), Catch::Matchers::Contains("batch_size"));
  CHECK_THROWS_WITH(udp_receiver({.address = "localhost"}),
                    Catch::Matchers::Contains("not a numeric IPv4 or IPv6 address"));
  udp_receiver first;
  CHECK_THROWS_AS(udp_receiver({.port = first.local_port()}), socket_error);
  try {
    udp_receiver second({.port = first.local_port()});
  } catch (const socket_error& e) {
    CHECK(e.code().value() == EADDRINUSE);
    CHECK_THAT(e.what(),
               Catch::Matchers::Contains("127.0.0.1:" + std::to_string(first.local_port())));
  }
}

TEST_CASE("udp_receiver survives a resource that fails, and leaks nothing", "[udp]") {
  pmrkit::counting_resource counted;
  pmrkit::test::failing_resource failing(&counted, 0);
  {
    udp_receiver rx({.batch_size = 4}, &failing);
    udp_sender tx(rx.local_port());
    REQUIRE(tx.send("first"));
    CHECK_THROWS_AS(rx.poll_once(5s, [](datagram&) {}), std::bad_alloc);
    failing.allow_all();
    const auto got = receive(rx, 1);
    REQUIRE(got.size() == 1);
    CHECK(got[0] == "first");
  }
  CHECK(counted.stats().bytes_in_use == 0);
}

TEST_CASE("udp_receiver receives over IPv6 loopback where it exists", "[udp]") {
  std::optional<udp_receiver> rx;
  try {
    rx.emplace(udp_receiver_options{.address = "::1"});
  } catch (const socket_error&) {
    WARN("no IPv6 loopback here; skipped");
    return;
  }
  pmrkit::test::net::fd_guard fd(::socket(AF_INET6, SOCK_DGRAM, 0));
  sockaddr_in6 to{};
  to.sin6_family = AF_INET6;
  to.sin6_port = htons(rx->local_port());
  to.sin6_addr = in6addr_loopback;
  REQUIRE(::sendto(fd.get(), "v6", 2, 0, reinterpret_cast<sockaddr*>(&to), sizeof to) == 2);
  std::string peer;
  std::size_t got = 0;
  poll_until([&] { return got == 1; }, [&] {
    got += rx->poll_once(100ms, [&](datagram& d) { peer = d.peer.to_string(); });
  });
  REQUIRE(got == 1);
  CHECK(peer.rfind("[::1]:", 0) == 0);
}

}  // namespace
