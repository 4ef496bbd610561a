// pmrkit/datagram/tcp_receiver.hpp — receive syslog messages over TCP into pooled buffers.
//
// Listens on an address, accepts many connections (epoll) and splits each stream into
// messages with a syslog_framer (RFC 6587: octet counting or newline-delimited). Every message
// is handed to your handler in a byte_buffer from a buffer_pool on the memory resource you
// chose, with its sender and connection number; move the buffer out to keep it. A buffer the
// handler leaves alone is reused for the next message (if it is not more than 4 times too
// large for it), so a steady stream costs no pool traffic at all. Reads go into one pooled
// read buffer the receiver reuses. A connection whose stream breaks the framing (a
// frame over max_frame_size, a bad octet count) is closed and counted, and the error is passed
// to the error handler if one is set; the other connections are served on. So that no one
// peer can take every connection, each peer address (its port left out) may hold at most
// max_connections_per_peer, and a connection that sends nothing for idle_timeout is closed.
//
// Thread-safety: one thread at a time calls run() or poll_once(), and the handlers run on that
// thread. stop() may be called from any thread and from a signal handler; stats(),
// local_port() and pool() from any thread.
// Ownership: the receiver holds one message buffer and one read buffer between calls, and each
// connection with a frame begun holds the buffer it is assembled in until the frame is complete or
// the connection closes. That buffer grows geometrically (in power-of-two sizes up to the pool's
// largest bucket, exact sizes past it), always under 2 × max_frame_size a connection, times
// max_connections in all. All go back to the pool when the receiver is destroyed. With the
// constructor that takes a resource the receiver owns its pool, so buffers a handler kept must be
// destroyed before the receiver; with the one that takes a pool, the pool must outlive every
// buffer.
#pragma once

#include <atomic>
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <memory_resource>
#include <span>
#include <string>

#include "pmrkit/buffer_pool.hpp"
#include "pmrkit/byte_buffer.hpp"
#include "pmrkit/function_ref.hpp"
#include "pmrkit/datagram/peer_address.hpp"
#include "pmrkit/datagram/syslog_framer.hpp"

namespace pmrkit::datagram {

struct tcp_receiver_options {
  std::string address = "127.0.0.1";  // numeric IPv4 or IPv6 address to listen on
  std::uint16_t port = 0;             // 0: an ephemeral port, see local_port()
  framing mode = framing::automatic;
  std::size_t max_frame_size = 64 * 1024;  // 1 byte .. 1 GiB
  std::size_t max_connections = 1024;      // more are accepted and closed at once, and counted
  // Connections one peer address may hold at once (all its ports together); more from it are
  // accepted, closed at once and counted as rejected. 1 .. max_connections makes sense; more
  // than max_connections is no limit.
  std::size_t max_connections_per_peer = 64;
  // A connection that sends nothing for this long is closed and counted; 0: never.
  std::chrono::milliseconds idle_timeout = std::chrono::minutes(5);
  // The read buffer, 512 .. 16 MiB: up to the pool's largest bucket (1 MiB for the receiver's
  // own pool) rounded up to a power of two, past it allocated at exactly this size. Each read()
  // call fills as much of it as the connection has ready.
  std::size_t read_buffer_size = 64 * 1024;
  int listen_backlog = 128;
};

struct tcp_receiver_stats {
  std::uint64_t frames = 0;                // messages handed to the handler
  std::uint64_t bytes_received = 0;        // every byte read, framing included
  std::uint64_t connections_accepted = 0;
  std::uint64_t connections_closed = 0;    // for any reason
  std::uint64_t connections_rejected = 0;  // over max_connections or max_connections_per_peer
  std::uint64_t framing_errors = 0;        // connections closed for breaking the framing
  std::uint64_t cut_at_close = 0;          // connections that ended inside a frame, its begun
                                           // part lost: the peer closed or reset, or it went
                                           // idle (counted in idle_closed too)
  std::uint64_t accept_failures = 0;       // accept() found no descriptor or memory; accepting
                                           // then pauses 100 ms (the connection waits queued).
                                           // Also a connection epoll would not watch (closed)
  std::uint64_t connections_reset = 0;     // ended by the peer with a reset (RST) or an error
  std::uint64_t idle_closed = 0;           // closed after sending nothing for idle_timeout
  std::uint64_t closed_by_exception = 0;   // closed because the handler or the resource threw
                                           // while its bytes were handed on: the rest of what
                                           // it had sent, and will send, is lost
};

// What the message handler receives. `buffer` holds exactly the message (no count, no LF).
struct tcp_frame {
  byte_buffer buffer;  // move it out to keep it
  peer_address peer;
  std::uint64_t connection = 0;  // numbered from 1 in order of acceptance
  std::span<const std::byte> bytes() const noexcept { return buffer.span(); }
};

// What the error handler receives when a connection is closed for breaking the framing.
struct connection_error {
  peer_address peer;
  std::uint64_t connection = 0;
  framing_error error = framing_error::none;
};

using tcp_frame_handler = function_ref<void(tcp_frame&)>;

class tcp_receiver {
 public:
  // Listens now, with a pool of its own over `resource`. Throws invalid_option for an option
  // out of range, socket_error if a system call fails.
  explicit tcp_receiver(const tcp_receiver_options& options = {},
                        std::pmr::memory_resource* resource = std::pmr::get_default_resource());
  // Same, with buffers from `pool`, which must outlive the receiver and every kept buffer.
  tcp_receiver(const tcp_receiver_options& options, buffer_pool& pool);
  ~tcp_receiver();  // closes every connection
  tcp_receiver(const tcp_receiver&) = delete;
  tcp_receiver& operator=(const tcp_receiver&) = delete;

  // Waits up to `timeout` (negative: no limit) for activity or stop(), then accepts, reads and
  // hands on what is ready, and closes connections idle for idle_timeout (the wait ends early
  // when one is due). Returns the number of messages handed on. If the handler throws,
  // the exception propagates and the connection the message came from is closed (the rest of
  // its bytes cannot be framed).
  std::size_t poll_once(std::chrono::milliseconds timeout, tcp_frame_handler handler);
  // Serves until stop() is called; returns the number of messages handed on.
  std::uint64_t run(tcp_frame_handler handler);

  // Called, on the receiving thread, for each connection closed for breaking the framing.
  void set_error_handler(std::function<void(const connection_error&)> on_error);

  // Makes run() return, and any poll_once() wait end, promptly. Sticky. Async-signal-safe.
  void stop() noexcept;
  bool stop_requested() const noexcept { return stop_requested_.load(std::memory_order_acquire); }

  tcp_receiver_stats stats() const noexcept;
  std::size_t open_connections() const noexcept;  // the receiving thread's view
  std::uint16_t local_port() const noexcept { return port_; }
  const tcp_receiver_options& options() const noexcept { return options_; }
  buffer_pool& pool() noexcept { return *pool_; }

 private:
  struct impl;
  tcp_receiver(const tcp_receiver_options& options, std::unique_ptr<buffer_pool> owned,
               buffer_pool* pool);

  tcp_receiver_options options_;
  std::unique_ptr<buffer_pool> owned_pool_;
  buffer_pool* pool_;
  std::uint16_t port_ = 0;
  std::unique_ptr<impl> impl_;
  std::atomic<bool> stop_requested_{false};
};

}  // namespace pmrkit::datagram
