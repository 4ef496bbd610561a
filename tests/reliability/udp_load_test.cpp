// UDP load on loopback: a separate sender process sends a bounded number of datagrams (mixed
// sizes, one in twenty over max_datagram_size) as fast as it can, for a bounded time, while a
// udp_receiver runs on its own thread. The handler checks every datagram's bytes and hands
// some buffers to a second thread that returns them to the pool from there. The test ends
// with an exact account:
//     sent = delivered + truncated + dropped by the kernel (SO_RXQ_OVFL)
// and the pool's memory under its bound, with no datagram corrupt or handed on twice.
// The kernel reports its drop count with the next datagram it queues, so once the sender is
// done the test sends probe datagrams, one at a time, until the account closes (each probe
// is counted in `sent` too). Fixed work by default; PMRKIT_LOAD_SECONDS=N sends for ~N s.
#include <fcntl.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <bit>
#include <catch2/catch.hpp>
#include <chrono>
#include <condition_variable>
#include <cstdio>
#include <deque>
#include <mutex>
#include <optional>
#include <sstream>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

#include "load_config.hpp"
#include "loopback_sockets.hpp"
#include "pmrkit/counting_resource.hpp"
#include "pmrkit/datagram/udp_receiver.hpp"
#include "udp_load_payload.hpp"

extern char** environ;

namespace load = pmrkit::test::udp_load;
namespace dg = pmrkit::datagram;

namespace {

struct sender_report {
  std::uint64_t sent = 0, oversize = 0, bytes = 0, failed = 0;
};

// Runs the sender process to completion (killed after `limit`); nullopt if it failed.
std::optional<sender_report> run_sender(std::uint16_t port, std::uint64_t count, double seconds,
                                        std::size_t max_ok) {
  int out[2];
  if (::pipe2(out, O_CLOEXEC) != 0) return std::nullopt;
  posix_spawn_file_actions_t actions;
  posix_spawn_file_actions_init(&actions);
  posix_spawn_file_actions_adddup2(&actions, out[1], 1);
  const std::vector<std::string> argv = {PMRKIT_UDP_LOAD_SENDER, std::to_string(port),
                                         std::to_string(count), std::to_string(seconds),
                                         std::to_string(max_ok)};
  std::vector<char*> args;
  for (const auto& a : argv) args.push_back(const_cast<char*>(a.c_str()));
  args.push_back(nullptr);
  pid_t pid = -1;
  const int error = posix_spawn(&pid, args[0], &actions, nullptr, args.data(), environ);
  posix_spawn_file_actions_destroy(&actions);
  ::close(out[1]);
  if (error != 0) {
    ::close(out[0]);
    return std::nullopt;
  }
  std::string text;
  char chunk[256];
  ssize_t got;
  while ((got = ::read(out[0], chunk, sizeof chunk)) > 0)
    text.append(chunk, static_cast<std::size_t>(got));
  ::close(out[0]);
  int status = 0;
  ::waitpid(pid, &status, 0);
  if (!WIFEXITED(status) || WEXITSTATUS(status) != 0) return std::nullopt;
  sender_report r;
  std::istringstream in(text);
  std::string word;
  in >> word >> r.sent >> word >> r.oversize >> word >> r.bytes >> word >> r.failed;
  if (!in) return std::nullopt;
  return r;
}

// Buffers the handler keeps, checked and returned to the pool on another thread.
class return_lane {
 public:
  explicit return_lane(std::size_t capacity) : capacity_(capacity) {}
  bool offer(pmrkit::byte_buffer& buffer) {
    const std::lock_guard guard(lock_);
    if (queue_.size() >= capacity_) return false;
    queue_.push_back(std::move(buffer));
    ready_.notify_one();
    return true;
  }
  void run(std::atomic<std::uint64_t>& corrupt) {
    std::unique_lock guard(lock_);
    while (true) {
      ready_.wait(guard, [&] { return closed_ || !queue_.empty(); });
      if (queue_.empty()) return;
      pmrkit::byte_buffer b = std::move(queue_.front());
      queue_.pop_front();
      guard.unlock();
      std::uint64_t seq;
      if (!load::check(b.span(), seq)) ++corrupt;
      b.reset();  // back to the pool, from this thread
      guard.lock();
    }
  }
  void close() {
    const std::lock_guard guard(lock_);
    closed_ = true;
    ready_.notify_one();
  }

 private:
  std::mutex lock_;
  std::condition_variable ready_;
  std::deque<pmrkit::byte_buffer> queue_;
  std::size_t capacity_;
  bool closed_ = false;
};

}  // namespace

TEST_CASE("UDP load: every datagram sent is delivered, truncated or dropped by the kernel",
          "[load][datagram][concurrent]") {
  const double seconds = pmrkit::test::load_seconds();
  const std::uint64_t count = seconds > 0 ? std::uint64_t{1} << 32 : 500000;
  const double time_limit = seconds > 0 ? seconds : 30;
  constexpr std::size_t max_ok = 8192;
  constexpr std::size_t lane_capacity = 64;

  pmrkit::counting_resource memory(std::pmr::new_delete_resource());
  dg::udp_receiver_options options;
  options.max_datagram_size = max_ok;
  options.batch_size = 32;
  std::atomic<std::uint64_t> corrupt{0};
  std::atomic<std::uint64_t> duplicates{0};
  std::atomic<std::uint64_t> probes_seen{0};
  std::vector<std::uint8_t> seen(
      static_cast<std::size_t>(std::min<std::uint64_t>(count, 1u << 26)) + 1024);
  std::uint64_t probes_sent = 0;
  std::optional<sender_report> report;
  dg::udp_receiver_stats stats;
  std::size_t bound = 0;
  double elapsed = 0;
  {
    dg::udp_receiver receiver(options, &memory);
    return_lane lane(lane_capacity);
    std::thread checker([&] { lane.run(corrupt); });
    std::uint64_t handled = 0;
    const std::uint64_t probe_base = count;
    std::thread receiving([&] {
      receiver.run([&](dg::datagram& d) {
        std::uint64_t seq;
        if (!load::check(d.bytes(), seq)) {
          ++corrupt;
          return;
        }
        if (seq >= probe_base) {
          probes_seen.fetch_add(1, std::memory_order_release);
          return;
        }
        if (seq < seen.size() && seen[seq]++ != 0) ++duplicates;
        if (++handled % 16 == 0) lane.offer(d.buffer);  // kept, returned on another thread
      });
    });

    const auto start = std::chrono::steady_clock::now();
    report = run_sender(receiver.local_port(), count, time_limit, max_ok);
    REQUIRE(report.has_value());

    // Close the account: probe until delivered + truncated + drops == sent (probes included).
    pmrkit::test::net::udp_sender prober(receiver.local_port());
    const auto balanced = [&] {
      stats = receiver.stats();
      return stats.received + stats.truncated + stats.kernel_drops == report->sent + probes_sent;
    };
    const auto give_up = std::chrono::steady_clock::now() + std::chrono::seconds(30);
    while (!balanced() && std::chrono::steady_clock::now() < give_up) {
      std::vector<std::byte> probe(64);
      load::fill(probe, probe_base + probes_sent);
      const std::uint64_t before = probes_seen.load(std::memory_order_acquire);
      if (!prober.send(probe)) throw std::runtime_error("sending a probe datagram failed");
      ++probes_sent;
      const auto wait_until = std::chrono::steady_clock::now() + std::chrono::seconds(2);
      while (probes_seen.load(std::memory_order_acquire) == before &&
             std::chrono::steady_clock::now() < wait_until)
        std::this_thread::sleep_for(std::chrono::milliseconds(1));
    }
    elapsed = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    receiver.stop();
    receiving.join();
    lane.close();
    checker.join();
    stats = receiver.stats();

    // The most the pool can hold: the armed batch, the buffers in the return lane (plus the
    // one being checked), what the pool retains per bucket and the two threads' caches, all of
    // one bucket (max_datagram_size rounded up to a power of two).
    const auto& po = receiver.pool().options();
    bound = (options.batch_size + lane_capacity + 1 + po.max_per_bucket +
             2 * po.thread_buffers_per_bucket) *
            std::bit_ceil(max_ok);
  }
  INFO("sent " << report->sent << " (+" << probes_sent << " probes), oversize "
               << report->oversize << ", delivered " << stats.received << ", truncated "
               << stats.truncated << ", kernel drops " << stats.kernel_drops);
  CHECK(stats.received + stats.truncated + stats.kernel_drops == report->sent + probes_sent);
  CHECK(stats.truncated <= report->oversize);
  CHECK(corrupt.load() == 0);
  CHECK(duplicates.load() == 0);
  CHECK(report->sent > 0);
  CHECK(stats.received > 0);
  CHECK(memory.stats().peak_bytes_in_use <= bound);
  CHECK(memory.stats().bytes_in_use == 0);  // receiver and pool gone: all returned
  WARN("UDP load: sent " << report->sent << " datagrams (" << report->bytes << " bytes, "
                         << report->oversize << " over max_datagram_size, " << report->failed
                         << " sendto failures) + " << probes_sent << " probes in " << elapsed
                         << " s; delivered " << stats.received << ", truncated "
                         << stats.truncated << ", dropped by the kernel " << stats.kernel_drops
                         << "; pool peak " << memory.stats().peak_bytes_in_use << " bytes of "
                         << bound << " allowed");
}
