#include "pmrkit/datagram/tcp_receiver.hpp"

#include <catch2/catch.hpp>

#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <future>
#include <map>
#include <memory_resource>
#include <new>
#include <memory>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include "net_test_support.hpp"
#include "pmrkit/buffer_pool.hpp"
#include "pmrkit/counting_resource.hpp"
#include "pmrkit/datagram/errors.hpp"

namespace {

using namespace pmrkit::datagram;
using pmrkit::test::net::as_string;
using pmrkit::test::net::poll_until;
using pmrkit::test::net::tcp_client;
using namespace std::chrono_literals;

struct collected {
  std::vector<std::string> frames;
  std::map<std::uint64_t, std::vector<std::string>> by_connection;
  std::vector<connection_error> errors;
};

// Polls the receiver until `count` frames arrived in total (or the deadline passed).
void serve_until(tcp_receiver& rx, collected& c, std::size_t count) {
  poll_until([&] { return c.frames.size() >= count; }, [&] {
    rx.poll_once(100ms, [&](tcp_frame& f) {
      c.frames.push_back(as_string(f.bytes()));
      c.by_connection[f.connection].push_back(as_string(f.bytes()));
    });
  });
}

TEST_CASE("tcp_receiver frames octet-counted and newline-delimited messages", "[tcp]") {
  pmrkit::counting_resource counted;
  {
    tcp_receiver rx({}, &counted);
    REQUIRE(rx.local_port() != 0);
    collected c;
    tcp_client client(rx.local_port());
    REQUIRE(client.send("11 <13>hello w<13>line one\n<13>line two\r\n"));
    serve_until(rx, c, 3);
    CHECK(c.frames == std::vector<std::string>{"<13>hello w", "<13>line one", "<13>line two"});
    const tcp_receiver_stats s = rx.stats();
    CHECK(s.frames == 3);
    CHECK(s.connections_accepted == 1);
    CHECK(s.framing_errors == 0);
    CHECK(rx.open_connections() == 1);
    client.close();
    poll_until([&] { return rx.open_connections() == 0; },
               [&] { rx.poll_once(100ms, [](tcp_frame&) {}); });
    CHECK(rx.stats().connections_closed == 1);
    CHECK(rx.stats().cut_at_close == 0);
  }
  CHECK(counted.stats().bytes_in_use == 0);
}

TEST_CASE("tcp_receiver assembles a frame sent one byte at a time", "[tcp]") {
  tcp_receiver rx;
  tcp_client client(rx.local_port());
  collected c;
  const std::string frames = "23 <13>octet counted frame<13>newline frame\n";
  // One byte, then one poll: every read the receiver makes holds a single byte.
  for (char byte : frames) {
    REQUIRE(client.send(std::string(1, byte)));
    const auto before = rx.stats().bytes_received;
    poll_until([&] { return rx.stats().bytes_received > before; }, [&] {
      rx.poll_once(100ms, [&](tcp_frame& f) { c.frames.push_back(as_string(f.bytes())); });
    });
  }
  serve_until(rx, c, 2);
  CHECK(c.frames == std::vector<std::string>{"<13>octet counted frame", "<13>newline frame"});
  CHECK(rx.stats().bytes_received == frames.size());
}

TEST_CASE("tcp_receiver closes a connection whose frame is too large and serves the others",
          "[tcp]") {
  tcp_receiver rx({.max_frame_size = 1024});
  std::vector<connection_error> errors;
  rx.set_error_handler([&](const connection_error& e) { errors.push_back(e); });
  tcp_client good(rx.local_port());
  tcp_client bad(rx.local_port());
  collected c;
  REQUIRE(good.send("5 first"));
  serve_until(rx, c, 1);
  REQUIRE(bad.send("5 fine!2000 "));  // one good frame, then a count over the maximum
  REQUIRE(good.send("6 second"));
  serve_until(rx, c, 3);
  poll_until([&] { return !errors.empty(); }, [&] { rx.poll_once(100ms, [](tcp_frame&) {}); });
  REQUIRE(errors.size() == 1);
  CHECK(errors[0].error == framing_error::frame_too_large);
  CHECK(rx.stats().framing_errors == 1);
  CHECK(bad.closed_by_peer());
  // The good connection still works after the bad one was closed.
  REQUIRE(good.send("<13>third\n"));
  serve_until(rx, c, 4);
  REQUIRE(c.frames.size() == 4);
  std::set<std::string> all(c.frames.begin(), c.frames.end());
  CHECK(all == std::set<std::string>{"first", "fine!", "second", "<13>third"});
  CHECK(c.by_connection[errors[0].connection] == std::vector<std::string>{"fine!"});
  CHECK(rx.open_connections() == 1);
}

TEST_CASE("tcp_receiver refuses an over-long line without waiting for its end", "[tcp]") {
  tcp_receiver rx({.max_frame_size = 100});
  tcp_client bad(rx.local_port());
  REQUIRE(bad.send("<13>" + std::string(200, 'x')));  // no line feed ever comes
  poll_until([&] { return rx.stats().framing_errors == 1; },
             [&] { rx.poll_once(100ms, [](tcp_frame&) { FAIL("nothing may be handed on"); }); });
  CHECK(rx.stats().framing_errors == 1);
  CHECK(bad.closed_by_peer());
}

TEST_CASE("tcp_receiver serves many connections at once", "[tcp]") {
  tcp_receiver rx;
  std::vector<std::unique_ptr<tcp_client>> clients;
  constexpr int connections = 20;
  constexpr int per_connection = 5;
  for (int i = 0; i < connections; ++i)
    clients.push_back(std::make_unique<tcp_client>(rx.local_port()));
  for (int round = 0; round < per_connection; ++round) {
    for (int i = 0; i < connections; ++i) {
      REQUIRE(clients[static_cast<std::size_t>(i)]->send(
          "<13>client " + std::to_string(i) + " message " + std::to_string(round) + "\n"));
    }
  }
  collected c;
  serve_until(rx, c, connections * per_connection);
  REQUIRE(c.frames.size() == connections * per_connection);
  CHECK(c.by_connection.size() == connections);
  for (const auto& [id, frames] : c.by_connection) {
    REQUIRE(frames.size() == per_connection);
    const std::string prefix = frames[0].substr(0, frames[0].find(" message "));
    for (int round = 0; round < per_connection; ++round)
      CHECK(frames[static_cast<std::size_t>(round)] ==
            prefix + " message " + std::to_string(round));
  }
  CHECK(rx.stats().connections_accepted == connections);
}

TEST_CASE("tcp_receiver turns away connections over max_connections", "[tcp]") {
  tcp_receiver rx({.max_connections = 2});
  tcp_client a(rx.local_port());
  tcp_client b(rx.local_port());
  tcp_client c(rx.local_port());
  poll_until([&] { return rx.stats().connections_accepted == 3; },
             [&] { rx.poll_once(100ms, [](tcp_frame&) {}); });
  CHECK(rx.stats().connections_rejected == 1);
  CHECK(rx.open_connections() == 2);
  CHECK(c.closed_by_peer());
}

// Raises the soft descriptor limit to `needed` if the hard limit allows; true if it is there.
bool allow_descriptors(rlim_t needed) {
  rlimit limit{};
  ::getrlimit(RLIMIT_NOFILE, &limit);
  if (limit.rlim_cur >= needed) return true;
  if (limit.rlim_max < needed) return false;
  limit.rlim_cur = needed;
  return ::setrlimit(RLIMIT_NOFILE, &limit) == 0;
}

// The lock-out a syslog receiver must not allow: one peer (127.0.0.2) opens as many idle
// connections as the receiver will take, then a well-behaved client (127.0.0.1) sends one
// message. With the defaults a server runs with, that message must arrive.
TEST_CASE("tcp_receiver serves a well-behaved client while one peer holds all it may",
          "[tcp]") {
  tcp_receiver rx;
  const std::size_t hostile_count = rx.options().max_connections;
  REQUIRE(allow_descriptors(2 * hostile_count + 256));
  auto serve = [&] {
    rx.poll_once(100ms, [](tcp_frame&) { FAIL("the hostile peer sends nothing"); });
  };
  std::vector<std::unique_ptr<tcp_client>> hostile;
  while (hostile.size() < hostile_count) {
    hostile.push_back(std::make_unique<tcp_client>(rx.local_port(), "127.0.0.2"));
    // Accept as they come: a full accept queue would make connect() wait for a SYN retry.
    if (hostile.size() % 32 == 0 || hostile.size() == hostile_count) {
      poll_until([&] { return rx.stats().connections_accepted == hostile.size(); }, serve);
    }
  }
  REQUIRE(rx.stats().connections_accepted == hostile_count);
  tcp_client good(rx.local_port());
  REQUIRE(good.send("<13>well-behaved\n"));
  std::vector<std::string> got;
  poll_until([&] { return !got.empty(); }, [&] {
    rx.poll_once(100ms, [&](tcp_frame& f) { got.push_back(as_string(f.bytes())); });
  });
  CHECK(got == std::vector<std::string>{"<13>well-behaved"});
  // The peer holds its maximum; the rest of its connections were turned away.
  const std::size_t per_peer = rx.options().max_connections_per_peer;
  CHECK(rx.stats().connections_rejected == hostile_count - per_peer);
  CHECK(rx.open_connections() == per_peer + 1);
}

TEST_CASE("tcp_receiver limits the connections each peer address holds", "[tcp]") {
  tcp_receiver rx({.max_connections = 8, .max_connections_per_peer = 3});
  auto serve = [&] { rx.poll_once(100ms, [](tcp_frame&) {}); };
  std::vector<std::unique_ptr<tcp_client>> hostile;
  for (int i = 0; i < 6; ++i)
    hostile.push_back(std::make_unique<tcp_client>(rx.local_port(), "127.0.0.2"));
  poll_until([&] { return rx.stats().connections_accepted == 6; }, serve);
  CHECK(rx.stats().connections_rejected == 3);
  CHECK(rx.open_connections() == 3);
  for (int i = 3; i < 6; ++i) CHECK(hostile[static_cast<std::size_t>(i)]->closed_by_peer());
  // Other addresses are served (the port does not make a peer: every client here has its own).
  tcp_client other(rx.local_port(), "127.0.0.3");
  tcp_client local(rx.local_port());
  REQUIRE(other.send("<13>from .3\n"));
  REQUIRE(local.send("<13>from .1\n"));
  collected c;
  serve_until(rx, c, 2);
  CHECK(std::set<std::string>(c.frames.begin(), c.frames.end()) ==
        std::set<std::string>{"<13>from .3", "<13>from .1"});
  // A connection the peer closes frees its place for another from the same peer.
  hostile[0]->close();
  poll_until([&] { return rx.open_connections() == 4; }, serve);
  tcp_client again(rx.local_port(), "127.0.0.2");
  REQUIRE(again.send("<13>again\n"));
  serve_until(rx, c, 3);
  CHECK(c.frames.size() == 3);
  CHECK(rx.stats().connections_rejected == 3);
}

TEST_CASE("tcp_receiver closes and counts a connection idle for idle_timeout", "[tcp]") {
  tcp_receiver rx({.idle_timeout = 50ms});
  tcp_client idle(rx.local_port());
  tcp_client cut(rx.local_port());
  REQUIRE(cut.send("20 only part"));
  // Each wait is far longer than the timeout: the receiver must end it itself to close them.
  poll_until([&] { return rx.stats().idle_closed == 2; },
             [&] { rx.poll_once(30s, [](tcp_frame&) { FAIL("nothing complete was sent"); }); });
  CHECK(rx.stats().idle_closed == 2);
  CHECK(rx.stats().connections_closed == 2);
  CHECK(rx.stats().cut_at_close == 1);  // the frame `cut` had begun is lost
  CHECK(rx.open_connections() == 0);
  CHECK(idle.closed_by_peer());
  CHECK(cut.closed_by_peer());
}

TEST_CASE("tcp_receiver does not close as idle a connection whose bytes wait unread",
          "[tcp]") {
  // One wait hands on at most 64 ready connections; the rest are read by the next. Their
  // bytes came in time, so the idle check between the two waits must not close them.
  tcp_receiver rx({.max_connections_per_peer = 128, .idle_timeout = 200ms});
  std::vector<std::unique_ptr<tcp_client>> clients;
  constexpr std::size_t connections = 100;
  for (std::size_t i = 0; i < connections; ++i)
    clients.push_back(std::make_unique<tcp_client>(rx.local_port()));
  poll_until([&] { return rx.open_connections() == connections; },
             [&] { rx.poll_once(10ms, [](tcp_frame&) {}); });
  REQUIRE(rx.open_connections() == connections);
  for (auto& client : clients) REQUIRE(client->send("<13>hello\n"));
  std::this_thread::sleep_for(300ms);  // every connection is now past its idle deadline
  collected c;
  rx.poll_once(0ms, [&](tcp_frame& f) { c.frames.push_back(as_string(f.bytes())); });
  CHECK(c.frames.size() < connections);  // the case this test is for: some left for later
  serve_until(rx, c, connections);
  CHECK(c.frames.size() == connections);
  CHECK(rx.stats().idle_closed == 0);
}

TEST_CASE("tcp_receiver counts a reset that waits unread at the idle check as a reset",
          "[tcp]") {
  // The idle check must look without reading: a peek would consume the pending reset, and the
  // read after it would see a clean close.
  tcp_receiver rx({.max_connections_per_peer = 128, .idle_timeout = 200ms});
  constexpr std::size_t senders = 64;  // fill the first wait, so the reset is left for the next
  auto target = std::make_unique<tcp_client>(rx.local_port());
  std::vector<std::unique_ptr<tcp_client>> clients;
  for (std::size_t i = 0; i < senders; ++i)
    clients.push_back(std::make_unique<tcp_client>(rx.local_port()));
  poll_until([&] { return rx.open_connections() == senders + 1; },
             [&] { rx.poll_once(10ms, [](tcp_frame&) {}); });
  REQUIRE(rx.open_connections() == senders + 1);
  std::this_thread::sleep_for(300ms);  // all past the idle deadline
  for (auto& client : clients) REQUIRE(client->send("<13>hello\n"));
  target->reset();
  std::this_thread::sleep_for(50ms);
  rx.poll_once(0ms, [](tcp_frame&) {});
  poll_until([&] { return rx.open_connections() == senders; },
             [&] { rx.poll_once(10ms, [](tcp_frame&) {}); });
  const tcp_receiver_stats s = rx.stats();
  CHECK(s.idle_closed == 0);
  CHECK(s.connections_closed == 1);
  CHECK(s.connections_reset == 1);
}

TEST_CASE("tcp_receiver forgets a closed connection that a forked child still holds", "[tcp]") {
  // A child forked without exec holds a copy of every descriptor, so closing the receiver's
  // does not end the socket, and epoll would go on reporting it, tagged with the address of the
  // connection object the close destroyed.
  tcp_receiver rx({.idle_timeout = 50ms});
  tcp_client client(rx.local_port());
  poll_until([&] { return rx.open_connections() == 1; },
             [&] { rx.poll_once(10ms, [](tcp_frame&) {}); });
  REQUIRE(rx.open_connections() == 1);
  int release[2];
  REQUIRE(::pipe(release) == 0);
  const pid_t child = ::fork();
  REQUIRE(child >= 0);
  if (child == 0) {
    char byte;
    ::close(release[1]);
    (void)!::read(release[0], &byte, 1);  // until the parent closes its end
    ::_exit(0);
  }
  ::close(release[0]);
  std::vector<std::string> frames;
  poll_until([&] { return rx.stats().idle_closed == 1; }, [&] {
    rx.poll_once(20ms, [&](tcp_frame& f) { frames.push_back(as_string(f.bytes())); });
  });
  REQUIRE(rx.stats().idle_closed == 1);
  // The socket is still open in the child: what the client sends now must reach nobody.
  REQUIRE(client.send("<13>after the close\n"));
  for (int i = 0; i < 5; ++i)
    rx.poll_once(20ms, [&](tcp_frame& f) { frames.push_back(as_string(f.bytes())); });
  ::close(release[1]);
  int status = 0;
  REQUIRE(::waitpid(child, &status, 0) == child);
  CHECK(frames.empty());
  const tcp_receiver_stats s = rx.stats();
  CHECK(s.frames == 0);
  CHECK(s.bytes_received == 0);
  CHECK(s.connections_closed == 1);
  CHECK(rx.open_connections() == 0);
}

TEST_CASE("tcp_receiver with the longest idle_timeout never closes for idleness", "[tcp]") {
  // now + idle_timeout overflowed into the past, and every connection was idle at once.
  tcp_receiver rx({.idle_timeout = std::chrono::milliseconds::max()});
  tcp_client quiet(rx.local_port());
  for (int i = 0; i < 3; ++i) rx.poll_once(20ms, [](tcp_frame&) {});
  CHECK(rx.open_connections() == 1);
  CHECK(rx.stats().idle_closed == 0);
}

// Lowers the soft descriptor limit to what is open now, and restores it when destroyed.
class descriptor_limit_guard {
 public:
  descriptor_limit_guard() {
    ::getrlimit(RLIMIT_NOFILE, &original_);
    const int lowest_free = ::dup(0);  // every descriptor below it is in use
    ::close(lowest_free);
    rlimit low = original_;
    low.rlim_cur = static_cast<rlim_t>(lowest_free);
    ::setrlimit(RLIMIT_NOFILE, &low);
  }
  ~descriptor_limit_guard() { ::setrlimit(RLIMIT_NOFILE, &original_); }
  descriptor_limit_guard(const descriptor_limit_guard&) = delete;
  descriptor_limit_guard& operator=(const descriptor_limit_guard&) = delete;

 private:
  rlimit original_{};
};

TEST_CASE("tcp_receiver pauses accepting while out of descriptors, then accepts",
          "[tcp][concurrent]") {
  tcp_receiver rx;
  // run() for a while: the queued connection keeps the listening socket readable, so a
  // receiver that did not pause would fail accept() in a tight loop. The thread starts before
  // the limit drops, and assertions run after it is back: sanitizer runtimes open files too.
  std::atomic<bool> started{false};
  std::thread runner([&] {
    started = true;
    rx.run([](tcp_frame&) {});
  });
  while (!started) std::this_thread::yield();
  pmrkit::test::net::fd_guard client(::socket(AF_INET, SOCK_STREAM, 0));  // made while allowed
  const sockaddr_in to = pmrkit::test::net::loopback(rx.local_port());
  int connected;
  {
    descriptor_limit_guard no_more_descriptors;
    // connect() needs no new descriptor here; the receiver's accept() would.
    connected = ::connect(client.get(), reinterpret_cast<const sockaddr*>(&to), sizeof to);
    std::this_thread::sleep_for(300ms);
  }
  REQUIRE(connected == 0);
  rx.stop();
  runner.join();
  CHECK(rx.stats().accept_failures >= 1);
  CHECK(rx.stats().accept_failures <= 20);  // one per 100 ms pause, with room for a slow machine
  // Stopping is sticky, so a second receiver on a fresh pool shows the other half: once
  // descriptors are free again, a paused receiver accepts.
  tcp_receiver later;
  tcp_client second(later.local_port());
  {
    descriptor_limit_guard no_more_descriptors;
    later.poll_once(30ms, [](tcp_frame&) {});
  }
  REQUIRE(later.stats().accept_failures == 1);
  REQUIRE(later.stats().connections_accepted == 0);
  REQUIRE(second.send("2 ok"));
  std::vector<std::string> got;
  poll_until(
      [&] { return !got.empty(); },
      [&] { later.poll_once(100ms, [&](tcp_frame& f) { got.push_back(as_string(f.bytes())); }); });
  CHECK(later.stats().connections_accepted == 1);
  CHECK(got == std::vector<std::string>{"ok"});
}

TEST_CASE("tcp_receiver counts a connection that ends inside a frame", "[tcp]") {
  tcp_receiver rx;
  {
    tcp_client client(rx.local_port());
    REQUIRE(client.send("20 only part"));
  }
  poll_until(
      [&] { return rx.stats().connections_closed == 1; },
      [&] { rx.poll_once(100ms, [](tcp_frame&) { FAIL("a cut frame is not handed on"); }); });
  CHECK(rx.stats().cut_at_close == 1);
}

TEST_CASE("tcp_receiver counts a connection reset inside a frame", "[tcp]") {
  tcp_receiver rx;
  tcp_client client(rx.local_port());
  REQUIRE(client.send("20 only part"));
  auto serve = [&] {
    rx.poll_once(100ms, [](tcp_frame&) { FAIL("a cut frame is not handed on"); });
  };
  // The partial frame is read before the reset, which might otherwise discard it unread.
  poll_until([&] { return rx.stats().bytes_received == 12; }, serve);
  client.reset();
  poll_until([&] { return rx.stats().connections_closed == 1; }, serve);
  CHECK(rx.stats().connections_closed == 1);
  CHECK(rx.stats().cut_at_close == 1);
  CHECK(rx.stats().connections_reset == 1);
}

TEST_CASE("tcp_receiver lets the handler keep a frame's buffer", "[tcp]") {
  pmrkit::counting_resource counted;
  {
    pmrkit::buffer_pool pool(&counted);
    std::vector<pmrkit::byte_buffer> kept;
    {
      tcp_receiver rx({}, pool);
      tcp_client client(rx.local_port());
      REQUIRE(client.send("3 one3 two5 three"));
      poll_until([&] { return kept.size() == 3; }, [&] {
        rx.poll_once(100ms, [&](tcp_frame& f) { kept.push_back(std::move(f.buffer)); });
      });
    }
    REQUIRE(kept.size() == 3);
    CHECK(as_string(kept[0].span()) == "one");
    CHECK(as_string(kept[2].span()) == "three");
    CHECK(kept[1].pool() == &pool);
    kept.clear();
    CHECK(counted.stats().bytes_in_use == pool.stats().bytes_retained);
  }
  CHECK(counted.stats().bytes_in_use == 0);
}

TEST_CASE("tcp_receiver closes the connection whose message made the handler throw", "[tcp]") {
  tcp_receiver rx;
  tcp_client client(rx.local_port());
  REQUIRE(client.send("1 a1 b"));
  bool caught = false;
  poll_until([&] { return caught; }, [&] {
    try {
      rx.poll_once(100ms, [](tcp_frame&) { throw std::runtime_error("handler failed"); });
    } catch (const std::runtime_error&) {
      caught = true;
    }
  });
  CHECK(caught);
  CHECK(rx.open_connections() == 0);
  CHECK(rx.stats().closed_by_exception == 1);
  CHECK(rx.stats().framing_errors == 0);
  CHECK(client.closed_by_peer());
}

// new_delete_resource() until told to fail.
class switchable_resource final : public std::pmr::memory_resource {
 public:
  bool failing = false;

 private:
  void* do_allocate(std::size_t bytes, std::size_t alignment) override {
    if (failing) throw std::bad_alloc();
    return std::pmr::new_delete_resource()->allocate(bytes, alignment);
  }
  void do_deallocate(void* p, std::size_t bytes, std::size_t alignment) override {
    std::pmr::new_delete_resource()->deallocate(p, bytes, alignment);
  }
  bool do_is_equal(const std::pmr::memory_resource& other) const noexcept override {
    return this == &other;
  }
};

TEST_CASE("tcp_receiver counts a connection closed because memory ran out as it received",
          "[tcp]") {
  switchable_resource memory;
  tcp_receiver rx({}, &memory);
  tcp_client client(rx.local_port());
  REQUIRE(client.send("<13>warm\n"));
  collected c;
  serve_until(rx, c, 1);
  REQUIRE(c.frames.size() == 1);
  memory.failing = true;
  REQUIRE(client.send("<13>" + std::string(3000, 'x') + "\n"));  // needs a larger buffer
  bool threw = false;
  poll_until([&] { return threw; }, [&] {
    try {
      rx.poll_once(100ms, [](tcp_frame&) {});
    } catch (const std::bad_alloc&) {
      threw = true;
    }
  });
  REQUIRE(threw);
  const tcp_receiver_stats s = rx.stats();
  CHECK(s.closed_by_exception == 1);
  CHECK(s.connections_closed == 1);
  CHECK(s.framing_errors == 0);
  CHECK(rx.open_connections() == 0);
  CHECK(client.closed_by_peer());
  // Memory back: the receiver serves on.
  memory.failing = false;
  tcp_client next(rx.local_port());
  REQUIRE(next.send("<13>after\n"));
  serve_until(rx, c, 2);
  CHECK(c.frames.back() == "<13>after");
}

TEST_CASE("tcp_receiver::stop ends run() promptly from another thread", "[tcp][concurrent]") {
  tcp_receiver rx;
  std::promise<std::uint64_t> done;
  auto result = done.get_future();
  std::thread runner([&] { done.set_value(rx.run([](tcp_frame&) {})); });
  {
    tcp_client client(rx.local_port());
    REQUIRE(client.send("2 hi"));
    poll_until([&] { return rx.stats().frames == 1; }, [] { std::this_thread::sleep_for(1ms); });
  }
  rx.stop();
  const bool stopped = result.wait_for(10s) == std::future_status::ready;
  if (!stopped) tcp_client wake(rx.local_port());
  runner.join();
  REQUIRE(stopped);
  CHECK(result.get() == 1);
  CHECK(rx.poll_once(-1ms, [](tcp_frame&) {}) == 0);
}

TEST_CASE("tcp_receiver rejects bad options", "[tcp]") {
  CHECK_THROWS_AS(tcp_receiver({.max_frame_size = 0}), invalid_option);
  CHECK_THROWS_WITH(tcp_receiver({.read_buffer_size = 1}),
                    Catch::Matchers::Contains("read_buffer_size 1 is out of range"));
  CHECK_THROWS_AS(tcp_receiver({.max_connections = 0}), invalid_option);
  CHECK_THROWS_WITH(tcp_receiver({.max_connections_per_peer = 0}),
                    Catch::Matchers::Contains("max_connections_per_peer 0 is out of range"));
  CHECK_THROWS_WITH(tcp_receiver({.idle_timeout = -1ms}),
                    Catch::Matchers::Contains("idle_timeout -1 ms is out of range"));
  tcp_receiver first;
  CHECK_THROWS_AS(tcp_receiver({.port = first.local_port()}), socket_error);
}

}  // namespace
