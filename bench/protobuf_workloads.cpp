// The protobuf adapter's workload, every strategy: serialize one SSF span and send it as one
// UDP datagram over loopback (datagrams go out 32 at a time with sendmmsg, as span_sender does).
//   Serialization/with_metrics   a span with tags and three metric samples (~420 bytes)
//   Serialization/no_metrics     the same span without samples (~160 bytes)
// Variants: fresh = serialize() per span: a new arena block and a new output buffer from the
// strategy, as code without reuse does (the Go daemon's proto.Marshal per datagram); pooled =
// span_sender: a reused message and output buffers from a buffer_pool on the strategy;
// limit = the same reused message serialized into static buffers (no allocator at all).
// The receiving socket never reads: the kernel drops what overflows its queue, at the same
// cost for every variant.
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <array>
#include <cstddef>
#include <stdexcept>
#include <string>

#include "bench_support.hpp"
#include "loopback.hpp"
#include "pmrkit/buffer_pool.hpp"
#include "pmrkit/byte_buffer.hpp"
#include "pmrkit/protobuf/span.hpp"
#include "pmrkit/protobuf/span_codec.hpp"
#include "pmrkit/protobuf/span_transport.hpp"

namespace pmrkit::bench {
namespace {

namespace pb = pmrkit::protobuf;

constexpr std::size_t send_batch = 32;
constexpr std::size_t max_span_bytes = 4096;  // the limit variant's static slot size

pb::span make_span(bool with_metrics) {
  pb::span s;
  s.version = 1;
  s.trace_id = 7'212'341'234'999;
  s.id = 7'212'341'235'001;
  s.parent_id = 7'212'341'234'999;
  s.start_timestamp = 1'717'755'330'123'456'789;
  s.end_timestamp = 1'717'755'330'135'456'789;
  s.service = "checkout-service";
  s.name = "POST /api/v1/orders";
  s.tags = {{"env", "production"}, {"region", "eu-west-1"}, {"host", "web-17.example.internal"}};
  if (with_metrics) {
    const char* names[] = {"http.request.duration", "db.query.count", "cache.hit.ratio"};
    for (int i = 0; i < 3; ++i) {
      pb::sample m;
      m.metric = i == 0 ? pb::metric_type::histogram : pb::metric_type::gauge;
      m.name = names[i];
      m.value = 12.5f * static_cast<float>(i + 1);
      m.timestamp = 1'717'755'330;
      m.sample_rate = 1;
      m.tags = {{"endpoint", "/api/v1/orders"}, {"status_code", "201"}};
      m.unit = i == 0 ? "ms" : "";
      s.metrics.push_back(m);
    }
  }
  return s;
}

// A bound socket that never reads: the destination of every variant.
class discard_socket {
 public:
  discard_socket() : fd_(::socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0)) {
    sockaddr_in at{};
    at.sin_family = AF_INET;
    at.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    socklen_t length = sizeof at;
    if (fd_ < 0 || ::bind(fd_, reinterpret_cast<sockaddr*>(&at), sizeof at) != 0 ||
        ::getsockname(fd_, reinterpret_cast<sockaddr*>(&at), &length) != 0)
      throw std::runtime_error("discard_socket: cannot bind");
    port_ = ntohs(at.sin_port);
  }
  ~discard_socket() { ::close(fd_); }
  discard_socket(const discard_socket&) = delete;
  discard_socket& operator=(const discard_socket&) = delete;
  std::uint16_t port() const { return port_; }

 private:
  int fd_;
  std::uint16_t port_ = 0;
};

// sendmmsg from a connected socket, as span_sender::flush does, for fresh and limit.
class batch_sender {
 public:
  explicit batch_sender(std::uint16_t port)
      : fd_(connect_loopback(SOCK_DGRAM, port, "batch_sender")) {}
  ~batch_sender() { ::close(fd_); }
  batch_sender(const batch_sender&) = delete;
  batch_sender& operator=(const batch_sender&) = delete;

  void queue(const std::byte* data, std::size_t size) {
    vectors_[queued_] = {const_cast<std::byte*>(data), size};
    headers_[queued_] = {};
    headers_[queued_].msg_hdr.msg_iov = &vectors_[queued_];
    headers_[queued_].msg_hdr.msg_iovlen = 1;
    ++queued_;
  }
  bool full() const { return queued_ == send_batch; }
  void flush() {
    std::size_t at = 0;
    while (at < queued_) {
      const int n =
          ::sendmmsg(fd_, headers_.data() + at, static_cast<unsigned>(queued_ - at), MSG_DONTWAIT);
      // A refused datagram is skipped, as span_sender does.
      at += n > 0 ? static_cast<std::size_t>(n) : 1;
    }
    queued_ = 0;
  }

 private:
  int fd_;
  std::size_t queued_ = 0;
  std::array<mmsghdr, send_batch> headers_{};
  std::array<iovec, send_batch> vectors_{};
};

void report(benchmark::State& state, std::size_t span_bytes) {
  state.SetItemsProcessed(state.iterations());
  state.SetBytesProcessed(state.iterations() * static_cast<std::int64_t>(span_bytes));
}

std::size_t encoded_size(const pb::span& s) {
  buffer_pool pool;
  pb::span_encoder encoder(pool);
  return encoder.encode(s).size();
}

void serialization_fresh(benchmark::State& state, const std::string& spec, bool with_metrics) {
  const pb::span s = make_span(with_metrics);
  const std::size_t span_bytes = encoded_size(s);
  run_row(state, spec, [&](benchmark::State& st, row_pass& pass) {
    strategy_under_test strategy(spec, pass);
    std::pmr::memory_resource* resource = strategy.resource();
    discard_socket sink;
    batch_sender sender(sink.port());
    std::array<byte_buffer, send_batch> in_flight;
    std::size_t queued = 0;
    pass.loop(st, [&] {
      in_flight[queued] = pb::serialize(s, resource);
      sender.queue(in_flight[queued].data(), in_flight[queued].size());
      if (++queued == send_batch) {
        sender.flush();
        for (auto& b : in_flight) b.reset();
        queued = 0;
        strategy.recycle_if_needed();
      }
    });
    sender.flush();
  });
  report(state, span_bytes);
}

void serialization_pooled(benchmark::State& state, const std::string& spec, bool with_metrics) {
  const pb::span s = make_span(with_metrics);
  const std::size_t span_bytes = encoded_size(s);
  run_row(state, spec, [&](benchmark::State& st, row_pass& pass) {
    strategy_under_test strategy(spec, pass);
    discard_socket sink;
    pb::span_sender sender({.port = sink.port(), .batch_size = send_batch}, strategy.resource());
    for (std::size_t i = 0; i < 2 * send_batch; ++i) sender.send(s);  // warm: message and pool
    pass.loop(st, [&] { sender.send(s); });
  });
  report(state, span_bytes);
}

void serialization_limit(benchmark::State& state, bool with_metrics) {
  alignas(64) static std::byte storage[send_batch][max_span_bytes];
  const pb::span s = make_span(with_metrics);
  const std::size_t span_bytes = encoded_size(s);
  run_row(state, "limit", [&](benchmark::State& st, row_pass& pass) {
    discard_socket sink;
    batch_sender sender(sink.port());
    buffer_pool unused;  // encode_to never touches it
    pb::span_encoder encoder(unused);
    (void)encoder.encode_to(s, storage[0]);  // warm the reused message
    std::size_t queued = 0;
    pass.loop(st, [&] {
      const std::size_t size = encoder.encode_to(s, storage[queued]);
      sender.queue(storage[queued], size);
      if (++queued == send_batch) {
        sender.flush();
        queued = 0;
      }
    });
    pass.hold_static(sizeof storage, send_batch * span_bytes);  // live: a batch of encoded spans
  });
  report(state, span_bytes);
}

void register_protobuf_workloads() {
  for (const bool with_metrics : {true, false}) {
    const std::string workload =
        with_metrics ? "Serialization/with_metrics/" : "Serialization/no_metrics/";
    for (const std::string& spec : strategy_specs()) {
      // Real time: sendmmsg can wait, and the throughput column should agree with time/op.
      benchmark::RegisterBenchmark((workload + spec + "/fresh").c_str(), serialization_fresh, spec,
                                   with_metrics)
          ->UseRealTime();
      benchmark::RegisterBenchmark((workload + spec + "/pooled").c_str(), serialization_pooled,
                                   spec, with_metrics)
          ->UseRealTime();
    }
    benchmark::RegisterBenchmark((workload + "limit").c_str(), serialization_limit, with_metrics)
        ->UseRealTime();
  }
}

const bool registered = add_registrar(register_protobuf_workloads);

}  // namespace
}  // namespace pmrkit::bench
