// pmrkit/datagram/udp_receiver.hpp — receive UDP datagrams into pooled buffers.
//
// The syslog server's fix, made reusable: every datagram lands in a byte_buffer from a
// buffer_pool on the memory resource you chose, and is handed to your handler with its bytes
// and its sender. A buffer the handler leaves alone is reused for a later datagram; to keep
// one, move it out (`auto mine = std::move(d.buffer);`) and it returns to the pool whenever
// you destroy it. Datagrams are read in batches with recvmmsg. A datagram longer than
// max_datagram_size is counted as truncated and never handed on cut; the kernel's drop count
// is read with every batch.
//
// Thread-safety: one thread at a time calls run(), poll_once() or receive_batch(), and the
// handler runs on that thread. stop() may be called from any thread, and from a signal
// handler (it only stores a flag and writes to an eventfd). stats(), local_port() and pool()
// may be called from any thread.
// Ownership: the receiver keeps at most batch_size buffers armed for the next recvmmsg and
// gives them back to the pool when destroyed. With the constructor that takes a resource the
// receiver owns its pool, so buffers the handler kept must be destroyed before the receiver;
// with the one that takes a pool, the pool (and its resource) must outlive every buffer.
#pragma once

#include <atomic>
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <memory_resource>
#include <span>
#include <string>
#include <vector>

#include "pmrkit/buffer_pool.hpp"
#include "pmrkit/byte_buffer.hpp"
#include "pmrkit/function_ref.hpp"
#include "pmrkit/datagram/peer_address.hpp"
#include "pmrkit/datagram/udp_socket.hpp"
#include "pmrkit/single_writer_counter.hpp"
#include "pmrkit/datagram/unique_fd.hpp"

namespace pmrkit::datagram {

struct udp_receiver_options {
  std::string address = "127.0.0.1";  // numeric IPv4 or IPv6 address to bind
  std::uint16_t port = 0;             // 0: an ephemeral port, see local_port()
  // Largest datagram handed on, 1..65536 bytes; a longer one is counted in `truncated` and
  // dropped. A UDP datagram carries at most 65,507 bytes over IPv4 and 65,527 over IPv6 (no
  // jumbograms), so any value from 65,527 up, the default included, hands on every datagram.
  std::size_t max_datagram_size = 64 * 1024;
  // Kernel receive buffer (SO_RCVBUF), see udp_socket_options; 0 keeps the system default.
  std::size_t receive_buffer_size = 0;
  std::size_t batch_size = 32;  // datagrams per recvmmsg call, 1..1024
};

struct udp_receiver_stats {
  std::uint64_t received = 0;        // datagrams handed to the handler
  std::uint64_t bytes_received = 0;  // their bytes
  std::uint64_t truncated = 0;       // longer than max_datagram_size: counted, not handed on
  std::uint64_t kernel_drops = 0;    // dropped by the kernel, receive queue full (SO_RXQ_OVFL)
  std::uint64_t batches = 0;         // recvmmsg calls that returned datagrams
};

// What the handler receives. `buffer` holds exactly the datagram's bytes.
struct datagram {
  byte_buffer buffer;  // move it out to keep it
  peer_address peer;
  std::span<const std::byte> bytes() const noexcept { return buffer.span(); }
};

using datagram_handler = function_ref<void(datagram&)>;

class udp_receiver {
 public:
  // Binds now, with a pool of its own over `resource` sized for batch_size buffers of
  // max_datagram_size. Throws invalid_option for an option out of range, socket_error if
  // binding fails.
  explicit udp_receiver(const udp_receiver_options& options = {},
                        std::pmr::memory_resource* resource = std::pmr::get_default_resource());
  // Same, with buffers from `pool` (shared with other users; it must outlive the receiver and
  // every buffer a handler kept). A pool whose max_capacity, rounded up to a power of two, is
  // below max_datagram_size still works, but cannot keep the buffers it gets back.
  udp_receiver(const udp_receiver_options& options, buffer_pool& pool);
  ~udp_receiver();
  udp_receiver(const udp_receiver&) = delete;
  udp_receiver& operator=(const udp_receiver&) = delete;

  // Hands on what is queued now (at most one recvmmsg batch), without waiting. Returns the
  // number of datagrams handed to the handler. If the handler throws, the exception propagates
  // and the datagrams after it in the batch are handed on by the next call.
  std::size_t receive_batch(datagram_handler handler);
  // Waits up to `timeout` (negative: no limit) for datagrams or stop(), then receive_batch().
  std::size_t poll_once(std::chrono::milliseconds timeout, datagram_handler handler);
  // Receives until stop() is called; returns how many datagrams were handed on. Returns at
  // once if stop() was already called, handing on nothing (what a handler that threw left of
  // its batch stays for receive_batch() or poll_once()).
  std::uint64_t run(datagram_handler handler);

  // Makes run() return, and any poll_once() wait end, promptly. Sticky: later run() calls
  // return at once. Async-signal-safe.
  void stop() noexcept;
  bool stop_requested() const noexcept { return stop_requested_.load(std::memory_order_acquire); }

  udp_receiver_stats stats() const noexcept;
  std::uint16_t local_port() const noexcept { return socket_.local_port(); }
  std::size_t receive_buffer_size() const { return socket_.receive_buffer_size(); }
  const udp_receiver_options& options() const noexcept { return options_; }
  buffer_pool& pool() noexcept { return *pool_; }
  int native_handle() const noexcept { return socket_.native_handle(); }

 private:
  udp_receiver(const udp_receiver_options& options, std::unique_ptr<buffer_pool> owned,
               buffer_pool* pool);
  std::size_t deliver_pending(datagram_handler& handler);

  udp_receiver_options options_;
  std::unique_ptr<buffer_pool> owned_pool_;
  buffer_pool* pool_;
  udp_socket socket_;
  unique_fd wake_fd_;  // the eventfd stop() writes to
  std::vector<datagram> armed_;      // one per batch slot; buffers stay here between batches
  std::vector<receive_slot> slots_;  // the spans of armed_ handed to recvmmsg
  std::size_t pending_begin_ = 0;    // slots received but not yet handed on
  std::size_t pending_end_ = 0;
  std::atomic<bool> stop_requested_{false};
  // Written only by the receiving thread, read by stats() from any thread.
  single_writer_counter<std::uint64_t> received_;
  single_writer_counter<std::uint64_t> bytes_received_;
  single_writer_counter<std::uint64_t> truncated_;
  single_writer_counter<std::uint64_t> batches_;
};

}  // namespace pmrkit::datagram
