// udp_receiver's constructor cleans up when it fails part way: every operator new it makes is
// failed in turn (support/global_heap.hpp), and after each failure the process holds no more
// file descriptors than before (the socket and the wake-up eventfd are closed again). A
// program of its own because it replaces operator new.
#include <catch2/catch.hpp>

#include <cstddef>
#include <new>

#include "global_heap.hpp"
#include "open_descriptors.hpp"
#include "pmrkit/datagram/udp_receiver.hpp"

namespace {

namespace heap = pmrkit::test::global_heap;

using pmrkit::test::open_descriptors;

}  // namespace

TEST_CASE("udp_receiver: a constructor that fails part way leaves no descriptor open",
          "[udp][construction]") {
  pmrkit::datagram::udp_receiver_options options;
  options.batch_size = 4;
  const std::size_t before = open_descriptors();
  std::uint64_t failed = 0;
  for (std::uint64_t n = 1;; ++n) {
    bool built = false;
    heap::fail_at(n);
    try {
      pmrkit::datagram::udp_receiver receiver(options, std::pmr::new_delete_resource());
      built = true;
    } catch (const std::bad_alloc&) {
    }
    const bool fired = heap::fired();
    heap::disarm();
    if (built && !fired) break;  // every allocation the constructor makes has been failed once
    if (!built) ++failed;
    INFO("operator new number " << n << " failed");
    CHECK(open_descriptors() == before);
  }
  CHECK(failed > 0);
}
