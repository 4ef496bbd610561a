#include "pmrkit/protobuf/span_transport.hpp"

#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <bit>
#include <cerrno>
#include <cstring>
#include <vector>

#include "pmrkit/datagram/errors.hpp"
#include "pmrkit/datagram/peer_address.hpp"
#include "pmrkit/single_writer_counter.hpp"

namespace pmrkit::protobuf {
namespace {

constexpr std::size_t max_batch = 1024;


[[noreturn]] void throw_errno(const char* call, const std::string& where) {
  const int error = errno;
  throw datagram::socket_error(error,
                               std::string(call) + ' ' + where + ": " + std::strerror(error));
}

}  // namespace

struct span_sender::impl {
  impl(const span_sender_options& options, std::pmr::memory_resource* resource)
      : pool(resource), encoder(pool), batch(options.batch_size) {
    if (options.batch_size == 0 || options.batch_size > max_batch) {
      throw datagram::invalid_option("batch_size " + std::to_string(options.batch_size) +
                                     " is out of range; allowed: 1.." + std::to_string(max_batch));
    }
    if (options.port == 0) {
      throw datagram::invalid_option(
          "span_sender needs the receiver's port; port 0 is not allowed");
    }
    const auto to = datagram::peer_address::numeric(options.address, options.port);
    // Everything that may throw comes before the socket: a constructor that throws never runs
    // ~impl, which would close it.
    queue.reserve(batch);
    headers.resize(batch);
    vectors.resize(batch);
    fd = ::socket(to.family(), SOCK_DGRAM | SOCK_CLOEXEC, 0);
    if (fd < 0) throw_errno("socket(SOCK_DGRAM)", to.to_string());
    // Connected: sendmmsg needs no address per message, and the kernel reports a missing
    // receiver (ECONNREFUSED) instead of dropping silently.
    if (::connect(fd, to.data(), to.size()) != 0) {
      ::close(fd);
      throw_errno("connect udp", to.to_string());
    }
  }
  ~impl() { ::close(fd); }

  buffer_pool pool;
  span_encoder encoder;
  std::size_t batch;
  int fd = -1;
  std::vector<byte_buffer> queue;
  std::vector<mmsghdr> headers;
  std::vector<iovec> vectors;
  // Written only by the sending thread, read by stats() on any.
  single_writer_counter<std::uint64_t> sent;
  single_writer_counter<std::uint64_t> bytes_sent;
  single_writer_counter<std::uint64_t> send_errors;
  single_writer_counter<std::uint64_t> too_large;
  single_writer_counter<std::uint64_t> batches;
};

span_sender::span_sender(const span_sender_options& options, std::pmr::memory_resource* resource)
    : impl_(std::make_unique<impl>(options, resource)) {}

span_sender::~span_sender() {
  try {
    flush();
  } catch (...) {  // a destructor must not throw; what was queued is lost, and was counted
  }
}

void span_sender::send(const span& s) {
  byte_buffer bytes = impl_->encoder.encode(s);
  if (bytes.size() > max_datagram_payload) {
    impl_->too_large.add();
    return;
  }
  impl_->queue.push_back(std::move(bytes));
  if (impl_->queue.size() >= impl_->batch) flush();
}

std::size_t span_sender::flush() {
  impl& i = *impl_;
  const std::size_t count = i.queue.size();
  if (count == 0) return 0;
  for (std::size_t k = 0; k < count; ++k) {
    i.vectors[k] = {i.queue[k].data(), i.queue[k].size()};
    i.headers[k] = {};
    i.headers[k].msg_hdr.msg_iov = &i.vectors[k];
    i.headers[k].msg_hdr.msg_iovlen = 1;
  }
  std::size_t accepted = 0;
  std::size_t at = 0;
  // Each pass sends at least one message or skips one the kernel refused: at most `count`.
  while (at < count) {
    const int n =
        ::sendmmsg(i.fd, i.headers.data() + at, static_cast<unsigned>(count - at), MSG_DONTWAIT);
    i.batches.add();
    if (n < 0) {
      if (errno == EINTR) continue;
      i.send_errors.add();
      ++at;
      continue;
    }
    for (int k = 0; k < n; ++k)
      i.bytes_sent.add(i.headers[at + static_cast<std::size_t>(k)].msg_len);
    accepted += static_cast<std::size_t>(n);
    at += static_cast<std::size_t>(n);
  }
  i.sent.add(accepted);
  i.queue.clear();  // the buffers go back to the pool
  return accepted;
}

std::size_t span_sender::queued() const noexcept { return impl_->queue.size(); }

span_sender_stats span_sender::stats() const noexcept {
  const impl& i = *impl_;
  return {.sent = i.sent.get(),
          .bytes_sent = i.bytes_sent.get(),
          .send_errors = i.send_errors.get(),
          .too_large = i.too_large.get(),
          .batches = i.batches.get()};
}

buffer_pool& span_sender::pool() noexcept { return impl_->pool; }

// ---------------------------------------------------------------- span_receiver

namespace {
// Room for every armed datagram buffer and arena block, twice over; and blocks as large as
// the parser may learn to use, which the pool would otherwise free on return (and allocate
// again for every parse).
buffer_pool_options receiver_pool_options(const datagram::udp_receiver_options& options,
                                          const span_parser_options& parser_options) {
  buffer_pool_options pool;
  // Bounded before use: the receiver and the parser check the options only after the pool is
  // made (bit_ceil past 2^63 is undefined), and refuse what is out of range.
  constexpr std::size_t largest_datagram = 64 * 1024;
  constexpr std::size_t largest_batch = 1024;
  constexpr std::size_t largest_arena_block = std::size_t{1} << 30;
  pool.max_capacity =
      std::max({pool.max_capacity,
                std::bit_ceil(std::min(options.max_datagram_size, largest_datagram)),
                std::bit_ceil(std::min(parser_options.max_arena_block, largest_arena_block))});
  pool.max_per_bucket = std::max<std::size_t>(pool.max_per_bucket,
                                              2 * std::min(options.batch_size, largest_batch));
  return pool;
}
}  // namespace

span_receiver::span_receiver(const datagram::udp_receiver_options& options,
                             std::pmr::memory_resource* resource,
                             const span_parser_options& parser_options)
    : pool_(resource, receiver_pool_options(options, parser_options)),
      receiver_(options, pool_),
      parser_(pool_, parser_options) {}

std::size_t span_receiver::poll_once(std::chrono::milliseconds timeout,
                                     function_ref<void(const span_view&)> on_span) {
  std::size_t spans = 0;
  receiver_.poll_once(timeout, [&](datagram::datagram& d) {
    if (parser_.parse(d.bytes(), on_span)) ++spans;
  });
  return spans;
}

std::uint64_t span_receiver::run(function_ref<void(const span_view&)> on_span) {
  std::uint64_t spans = 0;
  receiver_.run([&](datagram::datagram& d) {
    if (parser_.parse(d.bytes(), on_span)) ++spans;
  });
  return spans;
}

}  // namespace pmrkit::protobuf
