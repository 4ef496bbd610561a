// pmrkit/datagram/udp_socket.hpp — a bound UDP socket that receives batches into your buffers.
//
// The layer under udp_receiver, for code that manages its own buffers (the benchmarks' fresh
// and limit variants use it so all variants share one receive path). receive() fills up to
// max_batch caller-provided slots with one recvmmsg call, never blocks, and marks datagrams
// longer than their slot as truncated instead of passing them on cut. The kernel's count of
// datagrams dropped for a full receive queue (SO_RXQ_OVFL) is read on every receive.
//
// Thread-safety: one thread at a time calls receive()/wait(); kernel_drops(), local_port() and
// native_handle() may be called from any thread. Move-only; closes its descriptor when
// destroyed.
#pragma once

#include <atomic>
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <span>
#include <string>

#include "pmrkit/datagram/peer_address.hpp"

namespace pmrkit::datagram {

struct udp_socket_options {
  std::string address = "127.0.0.1";  // numeric IPv4 or IPv6 address to bind
  std::uint16_t port = 0;             // 0: an ephemeral port, see local_port()
  // Kernel receive buffer (SO_RCVBUF) in bytes; 0 keeps the system default. A request above
  // net.core.rmem_max is retried with SO_RCVBUFFORCE (allowed with CAP_NET_ADMIN); without
  // that privilege the kernel's cap applies. receive_buffer_size() says what was granted.
  std::size_t receive_buffer_size = 0;
  std::size_t max_batch = 32;  // slots one receive() fills at most, 1..1024
};

// One datagram's place in a batch: the caller sets `buffer`, receive() sets the rest.
struct receive_slot {
  std::span<std::byte> buffer;
  std::size_t length = 0;         // bytes written to buffer (at most buffer.size())
  std::size_t datagram_size = 0;  // the datagram's real size; > length when truncated
  bool truncated = false;         // the datagram did not fit in buffer and was cut
  peer_address peer;
};

class udp_socket {
 public:
  // Binds now. Throws invalid_option for a bad address or max_batch, socket_error if a
  // system call fails (the port is taken, ...).
  explicit udp_socket(const udp_socket_options& options);
  ~udp_socket();
  udp_socket(udp_socket&& other) noexcept;
  udp_socket& operator=(udp_socket&& other) noexcept;
  udp_socket(const udp_socket&) = delete;
  udp_socket& operator=(const udp_socket&) = delete;

  // Receives what is queued, up to min(slots.size(), max_batch) datagrams, without blocking.
  // Returns how many slots were filled (0 if none was queued). Throws socket_error for an
  // error other than "nothing queued" or an interrupted call.
  std::size_t receive(std::span<receive_slot> slots);

  // Waits until a datagram is queued, `wake_fd` (if >= 0) is readable, or the timeout passes
  // (negative: no timeout). Returns true if a datagram is queued.
  bool wait(std::chrono::milliseconds timeout, int wake_fd = -1) const;

  std::uint16_t local_port() const noexcept { return port_; }
  std::size_t receive_buffer_size() const;  // what the kernel granted (SO_RCVBUF as read back)
  std::uint64_t kernel_drops() const noexcept { return drops_.load(std::memory_order_relaxed); }
  std::size_t max_batch() const noexcept { return max_batch_; }
  int native_handle() const noexcept { return fd_; }

 private:
  struct scratch;  // recvmmsg's headers, vectors and control buffers, allocated once
  int fd_ = -1;
  std::uint16_t port_ = 0;
  std::size_t max_batch_ = 0;
  std::unique_ptr<scratch> scratch_;
  std::uint32_t last_drop_counter_ = 0;  // the kernel's 32-bit counter, as last read
  std::atomic<std::uint64_t> drops_{0};
};

}  // namespace pmrkit::datagram
