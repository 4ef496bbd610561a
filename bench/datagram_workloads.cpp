// The datagram adapter's workloads, every strategy, receive only (no parsing), over loopback:
//   DatagramNoFormatting  receive one syslog datagram and hand it on
//   TCPNoFormatting       receive one octet-counted syslog frame from a TCP stream, hand it on
// Variants: fresh = a new buffer per message from the strategy (for UDP a zero-initialised
// 64 KiB one, as the original Go server made), pooled = pmrkit's receivers with a buffer_pool
// on the strategy, limit = the same receive path into static buffers.
//
// Only the receive path is timed. Each round sends a batch of messages untimed (they queue in
// the kernel), then times draining exactly that batch with manual timing; every message of the
// batch is one benchmark iteration and gets the batch's time divided by its size. Every
// variant uses the same syscalls (recvmmsg of 32 for UDP; poll/epoll then read for TCP), and
// every wait has a timeout: a lost message ends the benchmark with an error, never a hang.
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <array>
#include <chrono>
#include <cstddef>
#include <cstring>
#include <memory>
#include <optional>
#include <span>
#include <stdexcept>
#include <string>
#include <vector>

#include "bench_support.hpp"
#include "loopback.hpp"
#include "pmrkit/buffer_pool.hpp"
#include "pmrkit/byte_buffer.hpp"
#include "pmrkit/datagram/syslog_framer.hpp"
#include "pmrkit/datagram/tcp_receiver.hpp"
#include "pmrkit/datagram/udp_receiver.hpp"
#include "pmrkit/datagram/udp_socket.hpp"

namespace pmrkit::bench {
namespace {

namespace dg = pmrkit::datagram;
using clock_type = std::chrono::steady_clock;

constexpr std::size_t messages_per_round = 256;
constexpr std::size_t recv_batch = 32;               // recvmmsg vector, all variants
constexpr std::size_t max_datagram = 64 * 1024;      // what the original server allocated
constexpr std::size_t kernel_buffer = 8 << 20;       // SO_RCVBUF: a round never overflows it
constexpr std::chrono::milliseconds round_timeout{2000};

// A typical RFC 5424 line, as logger sends it (110 bytes).
constexpr std::string_view syslog_line =
    "<13>1 2024-06-07T10:15:30.123456+00:00 web-17 checkout 4242 - - order 981273 placed, "
    "total 129.95 EUR, 3 items";

// ------------------------------------------------------------------ rounds and timing

// Runs the benchmark loop in rounds: send(n) untimed, then drain(n) timed; returns false from
// drain when the batch did not arrive in time. The counting pass runs the same rounds untimed.
template <class Send, class Drain>
void run_rounds(benchmark::State& state, row_pass& pass, Send&& send, Drain&& drain) {
  if (pass.counting()) {  // the same rounds, untimed, with the heap counter on
    // One round first, uncounted, as row_pass::loop does.
    const auto first = static_cast<std::size_t>(
        std::min<benchmark::IterationCount>(messages_per_round, pass.counting_ops()));
    send(first);
    (void)drain(first);
    pass.begin_counting();
    benchmark::IterationCount done = 0;
    while (done < pass.counting_ops()) {
      const auto n = static_cast<std::size_t>(
          std::min<benchmark::IterationCount>(messages_per_round, pass.counting_ops() - done));
      send(n);
      if (!drain(n)) break;
      done += static_cast<benchmark::IterationCount>(n);
    }
    pass.end_counting(static_cast<double>(done));
    return;
  }
  pass.before_timed_loop();
  benchmark::IterationCount done = 0;
  std::size_t left = 0;
  double seconds_each = 0;
  for (auto _ : state) {
    if (left == 0) {
      const auto remaining = static_cast<std::size_t>(state.max_iterations - done);
      const std::size_t n = std::min(messages_per_round, remaining);
      send(n);
      const auto start = clock_type::now();
      const bool complete = drain(n);
      const std::chrono::duration<double> took = clock_type::now() - start;
      if (!complete) {
        state.SkipWithError("a round's messages did not all arrive within 2 s (dropped?)");
        break;
      }
      seconds_each = took.count() / static_cast<double>(n);
      left = n;
    }
    state.SetIterationTime(seconds_each);
    --left;
    ++done;
  }
  pass.after_timed_loop();
}

void report(benchmark::State& state, std::size_t message_size) {
  state.SetItemsProcessed(state.iterations());
  state.SetBytesProcessed(state.iterations() * static_cast<std::int64_t>(message_size));
}

// The handler's work in every variant: look at the bytes, nothing more ("no formatting").
struct sink {
  std::size_t messages = 0;
  std::size_t bytes = 0;
  void take(std::span<const std::byte> message) {
    const std::byte* first = message.data();
    benchmark::DoNotOptimize(first);
    ++messages;
    bytes += message.size();
  }
};

// ------------------------------------------------------------------ UDP

// Sends from a connected socket with one sendmmsg per 64 datagrams; allocates nothing per call.
class udp_blaster {
 public:
  explicit udp_blaster(std::uint16_t port)
      : fd_(connect_loopback(SOCK_DGRAM, port, "udp_blaster")) {
    for (std::size_t i = 0; i < headers_.size(); ++i) {
      vectors_[i] = {const_cast<char*>(syslog_line.data()), syslog_line.size()};
      headers_[i] = {};
      headers_[i].msg_hdr.msg_iov = &vectors_[i];
      headers_[i].msg_hdr.msg_iovlen = 1;
    }
  }
  ~udp_blaster() { ::close(fd_); }
  udp_blaster(const udp_blaster&) = delete;
  udp_blaster& operator=(const udp_blaster&) = delete;

  void send(std::size_t count) {
    while (count > 0) {
      const auto n = static_cast<unsigned>(std::min(count, headers_.size()));
      const int sent = ::sendmmsg(fd_, headers_.data(), n, 0);
      if (sent <= 0) throw std::runtime_error("udp_blaster: sendmmsg failed");
      count -= static_cast<std::size_t>(sent);
    }
  }

 private:
  int fd_;
  std::array<mmsghdr, 64> headers_{};
  std::array<iovec, 64> vectors_{};
};

dg::udp_socket_options socket_options() {
  return {.address = "127.0.0.1",
          .port = 0,
          .receive_buffer_size = kernel_buffer,
          .max_batch = recv_batch};
}

// fresh and limit: udp_socket, the layer under udp_receiver, with the variant's buffers.
template <class Arm, class Release>
bool drain_socket(dg::udp_socket& socket, std::array<dg::receive_slot, recv_batch>& slots,
                  sink& out, std::size_t count, Arm&& arm, Release&& release) {
  const std::size_t target = out.messages + count;
  while (out.messages < target) {
    for (std::size_t i = 0; i < recv_batch; ++i) arm(i);
    const std::size_t got = socket.receive(slots);
    if (got == 0) {
      if (!socket.wait(round_timeout)) return false;
      continue;
    }
    for (std::size_t i = 0; i < got; ++i) {
      out.take({slots[i].buffer.data(), slots[i].length});
      release(i);
    }
  }
  return true;
}

void datagram_fresh(benchmark::State& state, const std::string& spec) {
  run_row(state, spec, [&](benchmark::State& st, row_pass& pass) {
    strategy_under_test strategy(spec, pass);
    std::pmr::memory_resource* resource = strategy.resource();
    dg::udp_socket socket(socket_options());
    udp_blaster sender(socket.local_port());
    std::array<dg::receive_slot, recv_batch> slots;
    std::array<byte_buffer, recv_batch> buffers;
    sink out;
    // As the Go server did per read: a new, zeroed 64 KiB buffer, dropped after the handler.
    auto arm = [&](std::size_t i) {
      if (buffers[i].capacity() != 0) return;
      buffers[i] = byte_buffer::make_standalone(resource, max_datagram);
      buffers[i].resize(max_datagram);
      slots[i].buffer = buffers[i].span();
    };
    auto release = [&](std::size_t i) { buffers[i].reset(); };
    auto drain = [&](std::size_t n) {
      const bool ok = drain_socket(socket, slots, out, n, arm, release);
      for (auto& b : buffers) b.reset();  // no block is live between rounds (monotonic recycles)
      strategy.recycle_if_needed();
      return ok;
    };
    sender.send(1);  // warm-up round, untimed
    drain(1);
    run_rounds(st, pass, [&](std::size_t n) { sender.send(n); }, drain);
  });
  report(state, syslog_line.size());
}

void datagram_pooled(benchmark::State& state, const std::string& spec) {
  run_row(state, spec, [&](benchmark::State& st, row_pass& pass) {
    strategy_under_test strategy(spec, pass);
    dg::udp_receiver receiver({.port = 0,
                               .max_datagram_size = max_datagram,
                               .receive_buffer_size = kernel_buffer,
                               .batch_size = recv_batch},
                              strategy.resource());
    udp_blaster sender(receiver.local_port());
    sink out;
    auto handler = [&](dg::datagram& d) { out.take(d.bytes()); };
    auto drain = [&](std::size_t n) {
      const std::size_t target = out.messages + n;
      while (out.messages < target) {
        if (receiver.receive_batch(handler) == 0 && receiver.poll_once(round_timeout, handler) == 0)
          return false;
      }
      return true;
    };
    sender.send(recv_batch);  // warm: every armed buffer exists before timing
    drain(recv_batch);
    run_rounds(st, pass, [&](std::size_t n) { sender.send(n); }, drain);
  });
  report(state, syslog_line.size());
}

void datagram_limit(benchmark::State& state) {
  run_row(state, "limit", [&](benchmark::State& st, row_pass& pass) {
    // One cache line of stagger per slot: 64 KiB-aligned slots would all map to the same cache
    // sets and make the floor slower than a heap layout.
    constexpr std::size_t stride = max_datagram + 64;
    alignas(64) static std::byte storage[recv_batch * stride];
    dg::udp_socket socket(socket_options());
    udp_blaster sender(socket.local_port());
    std::array<dg::receive_slot, recv_batch> slots;
    for (std::size_t i = 0; i < recv_batch; ++i)
      slots[i].buffer = {storage + i * stride, max_datagram};
    sink out;
    auto drain = [&](std::size_t n) {
      return drain_socket(socket, slots, out, n, [](std::size_t) {}, [](std::size_t) {});
    };
    sender.send(1);
    drain(1);
    run_rounds(st, pass, [&](std::size_t n) { sender.send(n); }, drain);
    pass.hold_static(sizeof storage, recv_batch * max_datagram);
  });
  report(state, syslog_line.size());
}

// ------------------------------------------------------------------ TCP

// One octet-counted frame per message; a round's frames are prebuilt and written in one go.
const std::string& tcp_round_bytes() {
  static const std::string bytes = [] {
    std::string one = std::to_string(syslog_line.size()) + " " + std::string(syslog_line);
    std::string all;
    for (std::size_t i = 0; i < messages_per_round; ++i) all += one;
    return all;
  }();
  return bytes;
}
std::size_t tcp_frame_bytes() { return tcp_round_bytes().size() / messages_per_round; }

class tcp_writer {
 public:
  explicit tcp_writer(std::uint16_t port)
      : fd_(connect_loopback(SOCK_STREAM, port, "tcp_writer")) {
    const int on = 1;
    ::setsockopt(fd_, IPPROTO_TCP, TCP_NODELAY, &on, sizeof on);
    timeval timeout{2, 0};  // a stalled receiver fails the send instead of hanging it
    ::setsockopt(fd_, SOL_SOCKET, SO_SNDTIMEO, &timeout, sizeof timeout);
  }
  ~tcp_writer() { ::close(fd_); }
  tcp_writer(const tcp_writer&) = delete;
  tcp_writer& operator=(const tcp_writer&) = delete;
  int fd() const { return fd_; }

  void send(std::size_t frames) {
    std::size_t left = frames * tcp_frame_bytes();
    const char* p = tcp_round_bytes().data();
    while (left > 0) {
      const ssize_t n = ::send(fd_, p, left, MSG_NOSIGNAL);
      if (n <= 0) throw std::runtime_error("tcp_writer: send failed");
      p += n;
      left -= static_cast<std::size_t>(n);
    }
  }

 private:
  int fd_;
};

// A plain listening socket, for the variants that read the stream themselves.
class tcp_pair {
 public:
  tcp_pair() {
    const int listener = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    sockaddr_in at{};
    at.sin_family = AF_INET;
    at.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    socklen_t length = sizeof at;
    if (listener < 0 || ::bind(listener, reinterpret_cast<sockaddr*>(&at), sizeof at) != 0 ||
        ::listen(listener, 1) != 0 ||
        ::getsockname(listener, reinterpret_cast<sockaddr*>(&at), &length) != 0)
      throw std::runtime_error("tcp_pair: cannot listen");
    writer_ = std::make_unique<tcp_writer>(ntohs(at.sin_port));
    fd_ = ::accept4(listener, nullptr, nullptr, SOCK_NONBLOCK | SOCK_CLOEXEC);
    ::close(listener);
    if (fd_ < 0) throw std::runtime_error("tcp_pair: accept failed");
  }
  ~tcp_pair() { ::close(fd_); }
  tcp_pair(const tcp_pair&) = delete;
  tcp_pair& operator=(const tcp_pair&) = delete;
  int fd() const { return fd_; }
  tcp_writer& writer() { return *writer_; }

 private:
  std::unique_ptr<tcp_writer> writer_;
  int fd_ = -1;
};

// fresh and limit: wait (poll), read into a reused read buffer, frame, copy each frame out.
template <class OnFrame>
bool drain_stream(tcp_pair& pair, std::span<std::byte> read_buffer, dg::syslog_framer& framer,
                  sink& out, std::size_t count, OnFrame&& on_frame) {
  const std::size_t target = out.messages + count;
  while (out.messages < target) {
    pollfd p{pair.fd(), POLLIN, 0};
    if (::poll(&p, 1, static_cast<int>(round_timeout.count())) <= 0) return false;
    const ssize_t got = ::read(pair.fd(), read_buffer.data(), read_buffer.size());
    if (got <= 0) return false;
    if (framer.feed(read_buffer.first(static_cast<std::size_t>(got)), on_frame) !=
        dg::framing_error::none)
      return false;
  }
  return true;
}

constexpr std::size_t read_buffer_size = 64 * 1024;

void tcp_fresh(benchmark::State& state, const std::string& spec) {
  run_row(state, spec, [&](benchmark::State& st, row_pass& pass) {
    strategy_under_test strategy(spec, pass);
    std::pmr::memory_resource* resource = strategy.resource();
    tcp_pair pair;
    buffer_pool framer_pool(resource);
    dg::syslog_framer framer(framer_pool, {.max_frame_size = max_datagram});
    byte_buffer read_buffer = byte_buffer::make_standalone(resource, read_buffer_size);
    read_buffer.resize(read_buffer_size);
    sink out;
    // A new buffer per message from the strategy, as a reader that allocates each line does.
    auto on_frame = [&](std::span<const std::byte> frame) {
      byte_buffer message = byte_buffer::make_standalone(resource, frame.size());
      message.append(frame);
      out.take(message.span());
    };
    auto drain = [&](std::size_t n) {
      const bool ok = drain_stream(pair, read_buffer.span(), framer, out, n, on_frame);
      strategy.recycle_if_needed();  // between rounds no message buffer is live
      return ok;
    };
    pair.writer().send(1);
    drain(1);
    run_rounds(st, pass, [&](std::size_t n) { pair.writer().send(n); }, drain);
  });
  report(state, tcp_frame_bytes());
}

void tcp_pooled(benchmark::State& state, const std::string& spec) {
  run_row(state, spec, [&](benchmark::State& st, row_pass& pass) {
    strategy_under_test strategy(spec, pass);
    dg::tcp_receiver receiver(
        {.port = 0, .max_frame_size = max_datagram, .read_buffer_size = read_buffer_size},
        strategy.resource());
    tcp_writer writer(receiver.local_port());
    sink out;
    auto handler = [&](dg::tcp_frame& f) { out.take(f.bytes()); };
    auto drain = [&](std::size_t n) {
      const std::size_t target = out.messages + n;
      const auto deadline = clock_type::now() + round_timeout;
      while (out.messages < target) {
        receiver.poll_once(round_timeout, handler);
        if (clock_type::now() > deadline) return false;
      }
      return true;
    };
    // Warm: accept the connection, and let every pooled size exist.
    writer.send(messages_per_round);
    drain(messages_per_round);
    run_rounds(st, pass, [&](std::size_t n) { writer.send(n); }, drain);
  });
  report(state, tcp_frame_bytes());
}

void tcp_limit(benchmark::State& state) {
  run_row(state, "limit", [&](benchmark::State& st, row_pass& pass) {
    alignas(64) static std::byte read_storage[read_buffer_size];
    alignas(64) static std::byte frame_storage[max_datagram];
    tcp_pair pair;
    // Frames never straddle reads here (a round fits one read), so this pool stays unused.
    buffer_pool unused;
    dg::syslog_framer framer(unused, {.max_frame_size = max_datagram});
    sink out;
    auto on_frame = [&](std::span<const std::byte> frame) {
      std::memcpy(frame_storage, frame.data(), frame.size());  // the same copy as the others
      out.take({frame_storage, frame.size()});
    };
    auto drain = [&](std::size_t n) {
      return drain_stream(pair, read_storage, framer, out, n, on_frame);
    };
    pair.writer().send(1);
    drain(1);
    run_rounds(st, pass, [&](std::size_t n) { pair.writer().send(n); }, drain);
    pass.hold_static(sizeof read_storage + sizeof frame_storage,
                     sizeof read_storage + sizeof frame_storage);
  });
  report(state, tcp_frame_bytes());
}

// ------------------------------------------------------------------ registration

void register_datagram_workloads() {
  for (const std::string& spec : strategy_specs()) {
    benchmark::RegisterBenchmark(("DatagramNoFormatting/" + spec + "/fresh").c_str(),
                                 datagram_fresh, spec)
        ->UseManualTime();
    benchmark::RegisterBenchmark(("DatagramNoFormatting/" + spec + "/pooled").c_str(),
                                 datagram_pooled, spec)
        ->UseManualTime();
  }
  benchmark::RegisterBenchmark("DatagramNoFormatting/limit", datagram_limit)->UseManualTime();
  for (const std::string& spec : strategy_specs()) {
    benchmark::RegisterBenchmark(("TCPNoFormatting/" + spec + "/fresh").c_str(), tcp_fresh, spec)
        ->UseManualTime();
    benchmark::RegisterBenchmark(("TCPNoFormatting/" + spec + "/pooled").c_str(), tcp_pooled, spec)
        ->UseManualTime();
  }
  benchmark::RegisterBenchmark("TCPNoFormatting/limit", tcp_limit)->UseManualTime();
}

const bool registered = add_registrar(register_datagram_workloads);

}  // namespace
}  // namespace pmrkit::bench
