// tcp_receiver when memory runs out while it accepts: every operator new of a poll_once that
// accepts a connection is failed in turn (support/global_heap.hpp). The connection that could
// not be admitted is closed and counted closed, no descriptor is left open, and the per-peer
// counts still hold. A program of its own because it replaces operator new.
#include <catch2/catch.hpp>

#include <chrono>
#include <cstddef>
#include <new>

#include "global_heap.hpp"
#include "open_descriptors.hpp"
#include "net_test_support.hpp"
#include "pmrkit/datagram/tcp_receiver.hpp"

namespace {

namespace heap = pmrkit::test::global_heap;
using pmrkit::datagram::tcp_frame;
using pmrkit::datagram::tcp_receiver;
using pmrkit::test::net::tcp_client;
using namespace std::chrono_literals;

using pmrkit::test::open_descriptors;

}  // namespace

TEST_CASE("tcp_receiver: an accept that runs out of memory closes that connection alone",
          "[tcp][out_of_memory]") {
  // The descriptor was handed to the connection before it was made (lost when making it
  // failed); a failure after the connection joined the set left it uncounted for its peer, or
  // the counters with accepted != closed + open.
  const std::size_t before = open_descriptors();
  std::uint64_t failed = 0;
  for (std::uint64_t n = 1;; ++n) {
    INFO("operator new number " << n << " of the accepting poll_once failed");
    {
      tcp_receiver rx({.max_connections_per_peer = 1});
      tcp_client first(rx.local_port());
      heap::fail_at(n);
      bool threw = false;
      try {
        rx.poll_once(5s, [](tcp_frame&) {});
      } catch (const std::bad_alloc&) {
        threw = true;
      }
      const bool fired = heap::fired();
      heap::disarm();
      auto stats = rx.stats();
      CHECK(stats.connections_accepted == stats.connections_closed + rx.open_connections());
      // Whether or not the first was admitted, its peer holds one connection at most after a
      // second one comes: the count for it is right.
      tcp_client second(rx.local_port());
      rx.poll_once(5s, [](tcp_frame&) {});
      CHECK(rx.open_connections() == 1);
      stats = rx.stats();
      CHECK(stats.connections_accepted == stats.connections_closed + rx.open_connections());
      if (!fired) break;  // every allocation the accept makes has been failed once
      failed += threw;
    }
    CHECK(open_descriptors() == before);
  }
  CHECK(failed > 0);
}
