#include "pmrkit/datagram/udp_socket.hpp"

#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <utility>
#include <vector>

#include "pmrkit/datagram/errors.hpp"
#include "socket_util.hpp"

namespace pmrkit::datagram {

namespace {
constexpr std::size_t max_batch_limit = 1024;
// Room for the one control message we ask for: SO_RXQ_OVFL's 32-bit drop counter.
constexpr std::size_t control_size = CMSG_SPACE(sizeof(std::uint32_t));
}  // namespace

struct udp_socket::scratch {
  explicit scratch(std::size_t batch) : headers(batch), vectors(batch), control(batch) {}
  std::vector<mmsghdr> headers;
  std::vector<iovec> vectors;
  struct alignas(cmsghdr) control_block {
    unsigned char bytes[control_size];
  };
  std::vector<control_block> control;
};

udp_socket::udp_socket(const udp_socket_options& options) {
  if (options.max_batch == 0 || options.max_batch > max_batch_limit) {
    throw invalid_option("max_batch " + std::to_string(options.max_batch) +
                         " is out of range; allowed: 1.." + std::to_string(max_batch_limit));
  }
  const peer_address local = detail::parse_address(options.address, options.port);
  const std::string where = local.to_string();
  detail::unique_fd fd(::socket(local.family(), SOCK_DGRAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0));
  if (fd.get() < 0) detail::throw_errno(errno, "socket(SOCK_DGRAM)", where);
  const int on = 1;
  // The drop counter costs nothing until the queue overflows; then every datagram carries it.
  if (::setsockopt(fd.get(), SOL_SOCKET, SO_RXQ_OVFL, &on, sizeof on) != 0)
    detail::throw_errno(errno, "setsockopt(SO_RXQ_OVFL)", where);
  detail::set_receive_buffer(fd.get(), options.receive_buffer_size, where);
  if (::bind(fd.get(), local.data(), local.size()) != 0)
    detail::throw_errno(errno, "bind udp", where);
  port_ = detail::bound_port(fd.get());
  max_batch_ = options.max_batch;
  scratch_ = std::make_unique<scratch>(max_batch_);
  fd_ = fd.release();
}

udp_socket::~udp_socket() {
  if (fd_ >= 0) ::close(fd_);
}

udp_socket::udp_socket(udp_socket&& other) noexcept
    : fd_(std::exchange(other.fd_, -1)),
      port_(other.port_),
      max_batch_(other.max_batch_),
      scratch_(std::move(other.scratch_)),
      last_drop_counter_(other.last_drop_counter_),
      drops_(other.drops_.load(std::memory_order_relaxed)) {}

udp_socket& udp_socket::operator=(udp_socket&& other) noexcept {
  if (this != &other) {
    if (fd_ >= 0) ::close(fd_);
    fd_ = std::exchange(other.fd_, -1);
    port_ = other.port_;
    max_batch_ = other.max_batch_;
    scratch_ = std::move(other.scratch_);
    last_drop_counter_ = other.last_drop_counter_;
    drops_.store(other.drops_.load(std::memory_order_relaxed), std::memory_order_relaxed);
  }
  return *this;
}

std::size_t udp_socket::receive(std::span<receive_slot> slots) {
  const std::size_t count = std::min(slots.size(), max_batch_);
  if (count == 0 || fd_ < 0) return 0;
  scratch& s = *scratch_;
  for (std::size_t i = 0; i < count; ++i) {
    s.vectors[i] = {slots[i].buffer.data(), slots[i].buffer.size()};
    msghdr& h = s.headers[i].msg_hdr;
    h.msg_name = slots[i].peer.data();
    h.msg_namelen = peer_address::capacity();
    h.msg_iov = &s.vectors[i];
    h.msg_iovlen = 1;
    h.msg_control = s.control[i].bytes;
    h.msg_controllen = control_size;
    h.msg_flags = 0;
    s.headers[i].msg_len = 0;
  }
  int received;
  do {
    // MSG_TRUNC makes msg_len the datagram's real size, so a cut datagram is recognised
    // even where the flag alone would be ambiguous.
    received = ::recvmmsg(fd_, s.headers.data(), static_cast<unsigned>(count),
                          MSG_DONTWAIT | MSG_TRUNC, nullptr);
  } while (received < 0 && errno == EINTR);
  if (received < 0) {
    if (errno == EAGAIN || errno == EWOULDBLOCK) return 0;
    detail::throw_errno(errno, "recvmmsg", "");
  }
  std::uint64_t drops = drops_.load(std::memory_order_relaxed);
  for (std::size_t i = 0; i < static_cast<std::size_t>(received); ++i) {
    const msghdr& h = s.headers[i].msg_hdr;
    receive_slot& slot = slots[i];
    slot.datagram_size = s.headers[i].msg_len;
    slot.truncated = (h.msg_flags & MSG_TRUNC) != 0 || slot.datagram_size > slot.buffer.size();
    slot.length = std::min(slot.datagram_size, slot.buffer.size());
    slot.peer.set_size(h.msg_namelen);
    for (const cmsghdr* c = CMSG_FIRSTHDR(&h); c != nullptr;
         c = CMSG_NXTHDR(const_cast<msghdr*>(&h), const_cast<cmsghdr*>(c))) {
      if (c->cmsg_level == SOL_SOCKET && c->cmsg_type == SO_RXQ_OVFL &&
          c->cmsg_len >= CMSG_LEN(sizeof(std::uint32_t))) {
        std::uint32_t counter;
        std::memcpy(&counter, CMSG_DATA(c), sizeof counter);
        // The kernel's counter is cumulative and 32-bit: add what it moved by, so the total
        // survives its wrap-around.
        drops += static_cast<std::uint32_t>(counter - last_drop_counter_);
        last_drop_counter_ = counter;
      }
    }
  }
  drops_.store(drops, std::memory_order_relaxed);
  return static_cast<std::size_t>(received);
}

bool udp_socket::wait(std::chrono::milliseconds timeout, int wake_fd) const {
  return detail::wait_readable(fd_, wake_fd, timeout);
}

std::size_t udp_socket::receive_buffer_size() const { return detail::receive_buffer_size(fd_); }

}  // namespace pmrkit::datagram
