// pmrkit/protobuf/span_transport.hpp — send spans over UDP in batches; receive and parse them.
//
// span_sender serializes each span into a pooled buffer (span_encoder) and sends queued spans
// together with one sendmmsg call when batch_size are queued, or on flush(). One span is one
// datagram, as SSF has it. A send the kernel refuses (nobody listening, a full buffer) is
// counted, never thrown: a metrics client must not take its application down.
// span_receiver is a udp_receiver and a span_parser sharing one buffer_pool: datagrams are
// received into pooled buffers and parsed on a pooled arena block, and a datagram that is not
// a span is counted and skipped.
//
// Thread-safety: a sender is used by one thread at a time; stats() from any thread. A
// receiver's poll_once()/run() are called by one thread at a time; stop() and stats() from any
// thread (stop() also from a signal handler). Ownership: the resource must outlive the sender
// or receiver; both own their pools.
#pragma once

#include <atomic>
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <memory_resource>
#include <string>

#include "pmrkit/buffer_pool.hpp"
#include "pmrkit/datagram/udp_receiver.hpp"
#include "pmrkit/protobuf/span.hpp"
#include "pmrkit/protobuf/span_codec.hpp"

namespace pmrkit::protobuf {

struct span_sender_options {
  std::string address = "127.0.0.1";  // numeric IPv4 or IPv6 address of the receiver
  std::uint16_t port = 0;             // its port (required)
  std::size_t batch_size = 32;        // spans per sendmmsg call, 1..1024
};

struct span_sender_stats {
  std::uint64_t sent = 0;         // spans the kernel accepted
  std::uint64_t bytes_sent = 0;
  std::uint64_t send_errors = 0;  // spans the kernel refused (ECONNREFUSED, EAGAIN, ...)
  std::uint64_t too_large = 0;    // spans over max_datagram_payload, dropped unsent
  // sendmmsg calls: one a flush, and one more for each span the kernel refuses (the call that
  // reports it) and each call that resumes after a partial send or EINTR.
  std::uint64_t batches = 0;
};

class span_sender {
 public:
  // Throws datagram::invalid_option for a bad address, port 0 or batch_size out of range,
  // datagram::socket_error if the socket cannot be made.
  explicit span_sender(const span_sender_options& options,
                       std::pmr::memory_resource* resource = std::pmr::get_default_resource());
  ~span_sender();  // flushes what is queued
  span_sender(const span_sender&) = delete;
  span_sender& operator=(const span_sender&) = delete;

  // Serializes the span now and queues it; sends the batch once batch_size are queued.
  void send(const span& s);
  // Sends what is queued; returns how many spans the kernel accepted.
  std::size_t flush();
  std::size_t queued() const noexcept;

  span_sender_stats stats() const noexcept;
  buffer_pool& pool() noexcept;

 private:
  struct impl;
  std::unique_ptr<impl> impl_;
};

struct span_receiver_stats {
  datagram::udp_receiver_stats udp;
  span_parser_stats parser;
};

class span_receiver {
 public:
  // Binds now; see udp_receiver for the options and errors.
  explicit span_receiver(const datagram::udp_receiver_options& options = {},
                         std::pmr::memory_resource* resource = std::pmr::get_default_resource(),
                         const span_parser_options& parser_options = {});

  // Waits up to `timeout` for datagrams (or stop()), parses what arrived and calls on_span for
  // each span. Returns the number of spans handed on.
  std::size_t poll_once(std::chrono::milliseconds timeout,
                        function_ref<void(const span_view&)> on_span);
  // Until stop(); returns the number of spans handed on.
  std::uint64_t run(function_ref<void(const span_view&)> on_span);
  void stop() noexcept { receiver_.stop(); }

  span_receiver_stats stats() const noexcept { return {receiver_.stats(), parser_.stats()}; }
  std::uint16_t local_port() const noexcept { return receiver_.local_port(); }
  buffer_pool& pool() noexcept { return pool_; }

 private:
  buffer_pool pool_;
  datagram::udp_receiver receiver_;
  span_parser parser_;
};

}  // namespace pmrkit::protobuf
