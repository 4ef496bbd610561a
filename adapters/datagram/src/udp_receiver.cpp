#include "pmrkit/datagram/udp_receiver.hpp"

#include <algorithm>
#include <bit>

#include "pmrkit/datagram/errors.hpp"
#include "socket_util.hpp"

namespace pmrkit::datagram {
namespace {

constexpr std::size_t largest_datagram = 64 * 1024;
// run() drains at most this many batches before it looks at stop() again, so a flood cannot
// delay stopping by more than a few milliseconds.
constexpr int batches_between_stop_checks = 16;
constexpr std::size_t max_batch_size = 1024;  // recvmmsg's limit (UIO_MAXIOV)

const udp_receiver_options& checked(const udp_receiver_options& options) {
  if (options.max_datagram_size == 0 || options.max_datagram_size > largest_datagram) {
    throw invalid_option("max_datagram_size " + std::to_string(options.max_datagram_size) +
                         " is out of range; allowed: 1.." + std::to_string(largest_datagram) +
                         " bytes");
  }
  // udp_socket checks it too, but under its own name (max_batch), which is not this option's.
  if (options.batch_size == 0 || options.batch_size > max_batch_size) {
    throw invalid_option("batch_size " + std::to_string(options.batch_size) +
                         " is out of range; allowed: 1.." + std::to_string(max_batch_size));
  }
  return options;
}

udp_socket_options socket_options(const udp_receiver_options& options) {
  return {.address = options.address,
          .port = options.port,
          .receive_buffer_size = options.receive_buffer_size,
          .max_batch = options.batch_size};
}

// A pool that can keep every armed buffer plus as many again that handlers hand back.
buffer_pool_options pool_options_for(const udp_receiver_options& options) {
  buffer_pool_options pool;
  pool.max_capacity = std::max(pool.max_capacity, std::bit_ceil(options.max_datagram_size));
  pool.max_per_bucket = std::max<std::size_t>(pool.max_per_bucket, 2 * options.batch_size);
  return pool;
}

}  // namespace

// pool_options_for reads max_datagram_size, so it takes the options checked first (the order
// in which a call's arguments are made is unspecified).
udp_receiver::udp_receiver(const udp_receiver_options& options, std::pmr::memory_resource* resource)
    : udp_receiver(options,
                   std::make_unique<buffer_pool>(resource, pool_options_for(checked(options))),
                   nullptr) {}

udp_receiver::udp_receiver(const udp_receiver_options& options, buffer_pool& pool)
    : udp_receiver(checked(options), nullptr, &pool) {}

udp_receiver::udp_receiver(const udp_receiver_options& options,
                           std::unique_ptr<buffer_pool> owned, buffer_pool* pool)
    : options_(options),
      owned_pool_(std::move(owned)),
      pool_(pool != nullptr ? pool : owned_pool_.get()),
      socket_(socket_options(options)),
      wake_fd_(detail::make_wake_fd()),
      armed_(options.batch_size),
      slots_(options.batch_size) {}

udp_receiver::~udp_receiver() {
  armed_.clear();  // the armed buffers go back to the pool, which may be our own
}

std::size_t udp_receiver::receive_batch(datagram_handler handler) {
  if (pending_begin_ < pending_end_) return deliver_pending(handler);
  const std::size_t max = options_.max_datagram_size;
  for (std::size_t i = 0; i < armed_.size(); ++i) {
    byte_buffer& buffer = armed_[i].buffer;
    if (buffer.capacity() < max) buffer = pool_->acquire(max);  // taken by a handler: re-arm
    buffer.clear();
    slots_[i].buffer = {buffer.data(), max};
  }
  const std::size_t received = socket_.receive(slots_);
  if (received == 0) return 0;
  batches_.add();
  for (std::size_t i = 0; i < received; ++i) {
    if (slots_[i].truncated) continue;
    armed_[i].buffer.commit(slots_[i].length);
    armed_[i].peer = slots_[i].peer;
  }
  pending_begin_ = 0;
  pending_end_ = received;
  return deliver_pending(handler);
}

std::size_t udp_receiver::deliver_pending(datagram_handler& handler) {
  std::size_t delivered = 0;
  while (pending_begin_ < pending_end_) {
    // Advanced before the call: a throwing handler's datagram is not redelivered.
    const std::size_t i = pending_begin_++;
    if (slots_[i].truncated) {
      truncated_.add();
      continue;
    }
    received_.add();
    bytes_received_.add(slots_[i].length);
    ++delivered;
    handler(armed_[i]);
  }
  return delivered;
}

std::size_t udp_receiver::poll_once(std::chrono::milliseconds timeout, datagram_handler handler) {
  if (pending_begin_ < pending_end_) return deliver_pending(handler);
  if (stop_requested()) return 0;
  if (!socket_.wait(timeout, wake_fd_.get())) return 0;
  return receive_batch(handler);
}

std::uint64_t udp_receiver::run(datagram_handler handler) {
  std::uint64_t delivered = 0;
  if (stop_requested()) return 0;  // what a handler left stays for the next call that takes it
  // What a handler that threw left of its batch goes first, as poll_once hands it on: waiting
  // first would hold it until the next datagram arrived.
  if (pending_begin_ < pending_end_) delivered += deliver_pending(handler);
  while (!stop_requested()) {
    if (!socket_.wait(std::chrono::milliseconds(-1), wake_fd_.get())) continue;
    for (int i = 0; i < batches_between_stop_checks && !stop_requested(); ++i) {
      const std::uint64_t batches_before = batches_.get();
      delivered += receive_batch(handler);
      if (batches_.get() == batches_before) break;  // queue empty
    }
  }
  return delivered;
}

void udp_receiver::stop() noexcept {
  stop_requested_.store(true, std::memory_order_release);
  detail::signal_wake_fd(wake_fd_.get());
}

udp_receiver_stats udp_receiver::stats() const noexcept {
  return {.received = received_.get(),
          .bytes_received = bytes_received_.get(),
          .truncated = truncated_.get(),
          .kernel_drops = socket_.kernel_drops(),
          .batches = batches_.get()};
}

}  // namespace pmrkit::datagram
